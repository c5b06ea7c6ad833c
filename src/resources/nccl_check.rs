//! `data "hpc_nccl_check"`: judges an NCCL all-reduce run against the bus bandwidth the node type should
//! reach, so a postcondition can stop a long training run on a fabric that is not right. Works on a number
//! or on the text nccl-tests printed; no cloud credentials or network.

use async_trait::async_trait;

use crate::catalog::Cloud;
use crate::framework::{Attribute, AttributePath, Block, Context, DataSource, Diagnostics, Schema, Severity, Type, Value};
use crate::planner::nccl::{self, NcclRun};
use crate::planner::spec;

pub struct NcclCheck;

/// Below this largest message size nccl-tests' busbw has not reached its plateau.
const PLATEAU_BYTES: u64 = 1 << 30;

/// What was measured: a number, or a parsed nccl-tests run.
enum Measured {
    Number(f64),
    Run(NcclRun),
}

struct Inputs {
    expected: f64,
    measured: Measured,
    cloud: Option<Cloud>,
}

fn number(v: &Value) -> Option<f64> {
    v.as_number().map(|n| n.as_f64())
}

/// The validated inputs; `None` when a value is still unknown or an error was reported.
fn inputs(config: &Value, diags: &mut Diagnostics) -> Option<Inputs> {
    let errors_before = diags.iter().filter(|d| d.severity == Severity::Error).count();
    let mut known = true;

    let expected = match config.get("expected_busbw_gbs") {
        Value::Unknown => {
            known = false;
            None
        }
        Value::Null => {
            diags.error_at(
                AttributePath::attr("expected_busbw_gbs"),
                "Missing expected bus bandwidth",
                "expected_busbw_gbs is null. hpc_gpu_cluster's expected_busbw_gbs is null for node types without a \
                 published all-reduce figure; for those, pass the busbw (GB/s) of a run on nodes of the same type you trust.",
            );
            None
        }
        v => match number(v) {
            Some(x) if x > 0.0 => Some(x),
            x => {
                diags.error_at(
                    AttributePath::attr("expected_busbw_gbs"),
                    "Invalid expected bus bandwidth",
                    format!(
                        "expected_busbw_gbs must be a positive number of GB/s, got {}.",
                        x.map_or("a non-number".into(), |x| x.to_string())
                    ),
                );
                None
            }
        },
    };

    let cloud = match config.get("cloud") {
        Value::Unknown => {
            known = false;
            None
        }
        Value::String(name) => spec::check_cloud(name, AttributePath::attr("cloud"), diags),
        _ => None,
    };

    let (m, o) = (config.get("measured_busbw_gbs"), config.get("nccl_tests_output"));
    if m.is_unknown() || o.is_unknown() {
        known = false;
    }
    if m.is_present() && o.is_present() {
        diags.error_at(
            AttributePath::attr("measured_busbw_gbs"),
            "Conflicting measurements",
            "Set only one of measured_busbw_gbs and nccl_tests_output: nccl_tests_output already gives the bus bandwidth.",
        );
    } else if m.is_null() && o.is_null() {
        diags.error_at(
            AttributePath::attr("nccl_tests_output"),
            "Missing measurement",
            "Set nccl_tests_output to the text of an nccl-tests run (e.g. file(\"allreduce.log\")) or measured_busbw_gbs to \
             the all-reduce bus bandwidth it reported at the largest message size, in GB/s.",
        );
    }
    let mut measured = None;
    if m.is_present() {
        match number(m) {
            Some(x) if x >= 0.0 => measured = Some(Measured::Number(x)),
            x => diags.error_at(
                AttributePath::attr("measured_busbw_gbs"),
                "Invalid measured bus bandwidth",
                format!(
                    "measured_busbw_gbs must be zero or a positive number of GB/s, got {}.",
                    x.map_or("a non-number".into(), |x| x.to_string())
                ),
            ),
        }
    }
    if let Some(text) = o.as_str() {
        match nccl::parse_nccl_tests(text) {
            Ok(run) => {
                warn_about_the_run(&run, diags);
                measured = Some(Measured::Run(run));
            }
            Err(e) => diags.error_at(AttributePath::attr("nccl_tests_output"), "Invalid nccl-tests output", sentence(&e)),
        }
    }

    let errors = diags.iter().filter(|d| d.severity == Severity::Error).count();
    if !known || errors > errors_before {
        return None;
    }
    Some(Inputs { expected: expected?, measured: measured?, cloud })
}

/// A parser error as a sentence: "the text ..." -> "The text ....".
fn sentence(e: &str) -> String {
    let mut chars = e.chars();
    let mut s: String = chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default();
    if !s.ends_with('.') {
        s.push('.');
    }
    s
}

fn warn_about_the_run(run: &NcclRun, diags: &mut Diagnostics) {
    let path = || AttributePath::attr("nccl_tests_output");
    if let Some(test) = run.test.as_deref().filter(|t| !t.starts_with("all_reduce")) {
        diags.warning_at(
            path(),
            "Not an all-reduce run",
            format!("This is the output of {test}; expected bus bandwidths are all-reduce figures, so compare an all_reduce_perf run."),
        );
    }
    if run.largest_bytes < PLATEAU_BYTES {
        diags.warning_at(
            path(),
            "Largest message too small",
            format!(
                "The run's largest message is {} bytes; the bus bandwidth only reaches its plateau from about 1 GiB. Run \
                 all_reduce_perf up to 16 GiB (-e 16G) so the figure is comparable with the expected one.",
                run.largest_bytes
            ),
        );
    }
}

#[async_trait]
impl DataSource for NcclCheck {
    fn type_name(&self) -> &'static str {
        "hpc_nccl_check"
    }

    fn schema(&self) -> Schema {
        Schema::new(
            0,
            Block::new(
                "Judges an NCCL all-reduce run against the bus bandwidth the node type should reach: at least 80% of it is \
                 healthy, 50% to 80% points at placement or drivers, below 50% at the fabric; any element nccl-tests found \
                 wrong is a failure of its own. Use it in a postcondition to stop a long run on a fabric that is not right \
                 (postconditions need OpenTofu or Terraform 1.2 or later). Works without cloud credentials or network.",
            )
            .attribute(Attribute::required(
                "expected_busbw_gbs",
                Type::Number,
                "The all-reduce bus bandwidth the node type should reach, in GB/s: usually `hpc_gpu_cluster.<name>.expected_busbw_gbs`.",
            ))
            .attribute(Attribute::optional(
                "measured_busbw_gbs",
                Type::Number,
                "The measured all-reduce bus bandwidth in GB/s (nccl-tests' `busbw` at the largest message size). Set this or \
                 `nccl_tests_output`, not both.",
            ))
            .attribute(Attribute::optional(
                "nccl_tests_output",
                Type::String,
                "The text an nccl-tests run printed (all_reduce_perf, e.g. `file(\"allreduce.log\")`); the bus bandwidth is the \
                 better of out-of-place and in-place at the largest message size. Set this or `measured_busbw_gbs`, not both.",
            ))
            .attribute(Attribute::optional(
                "cloud",
                Type::String,
                "Cloud the nodes run on (`aws`, `azure`, `gcp` or `oci`), to tailor what `message` says to check.",
            ))
            .attribute(Attribute::computed("busbw_gbs", Type::Number, "The measured bus bandwidth in GB/s, given or parsed."))
            .attribute(Attribute::computed(
                "ratio",
                Type::Number,
                "`busbw_gbs` / `expected_busbw_gbs`, rounded to three decimals; `verdict` is decided on it.",
            ))
            .attribute(Attribute::computed(
                "shortfall_percent",
                Type::Number,
                "How far `busbw_gbs` is below the expected figure, in percent (one decimal); 0 at or above it.",
            ))
            .attribute(Attribute::computed(
                "verdict",
                Type::String,
                "`healthy` (ratio 0.8 or more), `placement-or-driver` (0.5 to 0.8: 20% or more short) or `fabric` (below 0.5: \
                 50% or more short).",
            ))
            .attribute(Attribute::computed("healthy", Type::Bool, "Whether `verdict` is `healthy` and no element was wrong."))
            .attribute(Attribute::computed(
                "message",
                Type::String,
                "The verdict in words: the shortfall, the likely cause and what to check on the cloud; data corruption first if \
                 any element was wrong.",
            ))
            .attribute(Attribute::computed(
                "wrong",
                Type::Number,
                "Elements nccl-tests reported wrong (its `#wrong` columns, or the out-of-bounds count if larger); 0 for \
                 `measured_busbw_gbs`.",
            )),
        )
    }

    fn validate(&self, config: &Value, diags: &mut Diagnostics) {
        inputs(config, diags);
    }

    async fn read(&self, _ctx: &Context, config: &Value, diags: &mut Diagnostics) -> Value {
        let computed = ["busbw_gbs", "ratio", "shortfall_percent", "verdict", "healthy", "message", "wrong"];
        let mut state = config.as_map().cloned().unwrap_or_default();
        let Some(i) = inputs(config, diags) else {
            if diags.has_errors() {
                return Value::Null;
            }
            // Still unknown (the CLI normally defers such reads): everything computed is unknown too.
            for name in computed {
                state.insert(name.into(), Value::Unknown);
            }
            return Value::Map(state);
        };
        let (busbw, wrong) = match &i.measured {
            Measured::Number(x) => (*x, 0),
            Measured::Run(run) => (run.busbw_gbs, run.wrong_elements()),
        };
        let a = nccl::assess(busbw, i.expected, wrong, i.cloud);
        state.insert("busbw_gbs".into(), Value::float(busbw));
        state.insert("ratio".into(), Value::float(a.ratio));
        state.insert("shortfall_percent".into(), Value::float(a.shortfall_percent));
        state.insert("verdict".into(), Value::from(a.verdict.as_str()));
        state.insert("healthy".into(), Value::from(a.healthy));
        state.insert("message".into(), Value::from(a.message));
        state.insert("wrong".into(), Value::int(i64::try_from(wrong).unwrap_or(i64::MAX)));
        Value::Map(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_util::sync::CancellationToken;

    const HEALTHY: &str = include_str!("../../tests/fixtures/nccl/healthy.txt");
    const THIRTY_UNDER: &str = include_str!("../../tests/fixtures/nccl/thirty_under.txt");
    const SIXTY_UNDER: &str = include_str!("../../tests/fixtures/nccl/sixty_under.txt");

    fn config(expected: Value, measured: Value, output: Value, cloud: Value) -> Value {
        Value::object([("expected_busbw_gbs", expected), ("measured_busbw_gbs", measured), ("nccl_tests_output", output), ("cloud", cloud)])
    }

    fn from_output(text: &str, cloud: &str) -> Value {
        config(Value::int(365), Value::Null, Value::from(text), Value::from(cloud))
    }

    async fn read(c: &Value) -> (Value, Diagnostics) {
        let mut d = Diagnostics::new();
        let v = NcclCheck.read(&Context::new(CancellationToken::new(), None), c, &mut d).await;
        (v, d)
    }

    #[tokio::test]
    async fn the_three_samples_get_their_verdicts() {
        let cases = [
            (HEALTHY, "oci", "healthy", true, 363.14, 0.995, 0.5),
            (THIRTY_UNDER, "aws", "placement-or-driver", false, 258.75, 0.709, 29.1),
            (SIXTY_UNDER, "gcp", "fabric", false, 145.71, 0.399, 60.1),
        ];
        for (text, cloud, verdict, healthy, busbw, ratio, shortfall) in cases {
            let (v, d) = read(&from_output(text, cloud)).await;
            assert!(d.is_empty(), "{d:?}");
            assert_eq!(v.get("verdict").as_str(), Some(verdict));
            assert_eq!(v.get("healthy"), &Value::from(healthy));
            assert_eq!(v.get("busbw_gbs"), &Value::float(busbw));
            assert_eq!(v.get("ratio"), &Value::float(ratio));
            assert_eq!(v.get("shortfall_percent"), &Value::float(shortfall));
            assert_eq!(v.get("wrong"), &Value::int(0));
            assert!(v.get("message").as_str().unwrap().contains(&format!("{busbw} GB/s")));
            // The configuration comes back as given, and the state fits the schema exactly.
            assert_eq!(v.get("nccl_tests_output").as_str(), Some(text));
            crate::framework::codec::encode_msgpack(&v, &NcclCheck.schema().value_type()).unwrap();
        }
    }

    #[tokio::test]
    async fn a_measured_number_works_without_output() {
        let (v, d) = read(&config(Value::int(460), Value::float(331.2), Value::Null, Value::from("azure"))).await;
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(v.get("verdict").as_str(), Some("placement-or-driver"));
        assert_eq!(v.get("ratio"), &Value::float(0.72));
        assert_eq!(v.get("wrong"), &Value::int(0));
        assert!(v.get("message").as_str().unwrap().contains("single placement group"));
        let (v, _) = read(&config(Value::int(460), Value::int(460), Value::Null, Value::Null)).await;
        assert_eq!((v.get("healthy"), v.get("shortfall_percent")), (&Value::from(true), &Value::float(0.0)));
    }

    #[tokio::test]
    async fn wrong_elements_fail_a_fast_run() {
        let text = HEALTHY.replacen("359.19      0", "359.19     12", 1);
        let (v, d) = read(&from_output(&text, "oci")).await;
        assert!(d.is_empty(), "{d:?}");
        assert_eq!((v.get("verdict").as_str(), v.get("healthy"), v.get("wrong")), (Some("healthy"), &Value::from(false), &Value::int(12)));
        assert!(v.get("message").as_str().unwrap().starts_with("Data corruption: nccl-tests found 12 wrong elements."));
    }

    #[tokio::test]
    async fn exactly_one_measurement_each_error_at_its_attribute() {
        let both = config(Value::int(365), Value::int(300), Value::from(HEALTHY), Value::Null);
        let (v, d) = read(&both).await;
        assert!(v.is_null());
        assert_eq!(
            (d.0[0].summary.as_str(), d.0[0].path.as_ref().unwrap().to_string()),
            ("Conflicting measurements", "measured_busbw_gbs".into())
        );
        let (_, d) = read(&config(Value::int(365), Value::Null, Value::Null, Value::Null)).await;
        assert_eq!(
            (d.0[0].summary.as_str(), d.0[0].path.as_ref().unwrap().to_string()),
            ("Missing measurement", "nccl_tests_output".into())
        );
        let (_, d) = read(&config(Value::int(0), Value::float(-1.0), Value::Null, Value::from("ibm"))).await;
        let at: Vec<(String, String)> = d.iter().map(|d| (d.summary.clone(), d.path.as_ref().unwrap().to_string())).collect();
        assert_eq!(
            at,
            [
                ("Invalid expected bus bandwidth".into(), "expected_busbw_gbs".into()),
                ("Unsupported cloud".into(), "cloud".into()),
                ("Invalid measured bus bandwidth".into(), "measured_busbw_gbs".into()),
            ]
        );
        let (_, d) = read(&config(Value::Null, Value::int(300), Value::Null, Value::Null)).await;
        assert_eq!(d.0[0].summary, "Missing expected bus bandwidth");
        assert!(d.0[0].detail.contains("a run on nodes of the same type you trust"));
    }

    #[tokio::test]
    async fn unparsable_output_is_a_diagnostic_at_nccl_tests_output() {
        let (v, d) = read(&from_output("Segmentation fault (core dumped)\n", "aws")).await;
        assert!(v.is_null());
        let e = &d.0[0];
        assert_eq!((e.summary.as_str(), e.path.as_ref().unwrap().to_string()), ("Invalid nccl-tests output", "nccl_tests_output".into()));
        assert!(e.detail.starts_with("No nccl-tests result rows found; expected the output of an nccl-tests binary"), "{}", e.detail);
        assert!(e.detail.contains("\"Segmentation fault (core dumped)\""), "{}", e.detail);
    }

    #[tokio::test]
    async fn small_runs_and_other_collectives_are_warned_about() {
        // The rows up to 512 MiB only.
        let small: String = HEALTHY
            .lines()
            .filter(|l| l.split_whitespace().next().and_then(|w| w.parse::<u64>().ok()).is_none_or(|size| size < 1 << 30))
            .map(|l| format!("{l}\n"))
            .collect();
        let text = format!("# Collective test starting: all_gather_perf\n{small}");
        let (v, d) = read(&from_output(&text, "oci")).await;
        let summaries: Vec<&str> = d.iter().map(|d| d.summary.as_str()).collect();
        assert_eq!(summaries, ["Not an all-reduce run", "Largest message too small"]);
        assert!(!d.has_errors());
        assert_eq!(v.get("busbw_gbs"), &Value::float(355.8), "the largest row left is 512 MiB");
    }

    #[test]
    fn unknown_values_pass_validation() {
        let mut d = Diagnostics::new();
        NcclCheck.validate(&config(Value::Unknown, Value::Null, Value::Unknown, Value::Unknown), &mut d);
        NcclCheck.validate(&config(Value::int(365), Value::Unknown, Value::Null, Value::Null), &mut d);
        NcclCheck.validate(&config(Value::int(365), Value::Unknown, Value::from(HEALTHY), Value::from("aws")), &mut d);
        assert!(d.is_empty(), "{d:?}");
    }

    #[tokio::test]
    async fn a_read_with_unknown_inputs_leaves_the_results_unknown() {
        let (v, d) = read(&config(Value::int(365), Value::Unknown, Value::Null, Value::Null)).await;
        assert!(d.is_empty());
        assert!(v.get("verdict").is_unknown() && v.get("healthy").is_unknown());
        crate::framework::codec::encode_msgpack(&v, &NcclCheck.schema().value_type()).unwrap();
    }
}
