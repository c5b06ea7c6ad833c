//! Architecture invariants from ARCHITECTURE.md, checked over the source tree.

use std::path::{Path, PathBuf};

fn sources(dir: &str) -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                out.push((path, text));
            }
        }
    }
    let mut out = Vec::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join(dir), &mut out);
    out
}

#[test]
fn only_the_protocol_module_sees_tonic_and_prost() {
    for (path, text) in sources("src") {
        if path.components().any(|c| c.as_os_str() == "protocol") {
            continue;
        }
        for word in ["tonic::", "prost::", "use tonic", "use prost"] {
            assert!(!text.contains(word), "{} uses {word}", path.display());
        }
    }
}

#[test]
fn the_planner_and_expanders_do_no_io() {
    let mut files = sources("src/planner");
    // The expanders are `clouds/<cloud>.rs` or `clouds/<cloud>/mod.rs`; the API clients beside them
    // (`clouds/<cloud>/signing.rs`, ...) talk to clouds and are exempt, as are the clients' rate limiter
    // (`clouds/throttle.rs`), their retry policy (`clouds/retry.rs`) and the backends' shared poll loop
    // (`clouds/shared.rs`).
    files.extend(sources("src/clouds").into_iter().filter(|(p, _)| {
        let parent = p.parent().and_then(|d| d.file_name()).map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        (parent == "clouds" && !["throttle.rs", "retry.rs", "shared.rs"].iter().any(|f| p.ends_with(f)))
            || p.file_name().is_some_and(|f| f == "mod.rs")
    }));
    files.extend(sources("src/catalog"));
    assert!(files.len() >= 8);
    for (path, text) in files {
        for word in ["std::fs", "std::net", "tokio", "reqwest", "SystemTime", "Instant::now", "std::env", "rand::", "HashMap"] {
            assert!(!text.contains(word), "{} uses {word}: the planner must be pure and deterministic", path.display());
        }
    }
}

#[test]
fn vendor_vocabulary_stays_in_clouds_and_catalog() {
    let pieces = ["\"aws_", "\"azurerm_", "\"google_", "\"oci_"];
    let services = ["amazonaws.com", "Microsoft.", "googleapis.com", "oraclecloud.com"];
    let mut files: Vec<(PathBuf, String, Vec<&str>)> = sources("src/planner").into_iter().map(|(p, t)| (p, t, pieces.to_vec())).collect();
    let neutral = sources("src/resources").into_iter().chain(
        sources("src")
            .into_iter()
            .filter(|(p, _)| p.ends_with("model.rs") || p.ends_with("ownership.rs") || p.ends_with("clouds/shared.rs")),
    );
    files.extend(neutral.map(|(p, t)| (p, t, pieces.iter().chain(&services).copied().collect())));
    assert!(files.len() >= 12);
    for (path, text, words) in files {
        for word in words {
            assert!(
                !code(&text).contains(word),
                "{} names a vendor piece or service ({word}...): that belongs in src/clouds or src/catalog",
                path.display()
            );
        }
    }
}

/// The code of a source file, without its unit tests (which may reach anywhere to build fixtures).
fn code(text: &str) -> &str {
    text.find("#[cfg(test)]").map_or(text, |at| &text[..at])
}

/// The top-level module a source file belongs to: `src/clouds/aws/api.rs` -> `clouds`.
fn module_of(path: &Path) -> String {
    let rel = path.strip_prefix(Path::new(env!("CARGO_MANIFEST_DIR")).join("src")).unwrap();
    let first = rel.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
    first.trim_end_matches(".rs").to_owned()
}

/// Layers point down only: protocol and provider -> resources -> planner -> clouds -> model, config,
/// ownership -> catalog -> framework, clock, nodes, redact. A module imports only modules of a lower layer (or
/// itself).
#[test]
fn layers_only_point_down() {
    let rank = |m: &str| match m {
        "framework" | "clock" | "nodes" | "redact" => 0,
        "catalog" | "ownership" => 1,
        "model" | "config" => 2,
        "clouds" => 3,
        "planner" => 4,
        "resources" => 5,
        // `fuzz` is test support only (`#[cfg(test)]`): it may reach every layer it feeds answers to.
        "protocol" | "provider" | "main" | "lib" | "fuzz" => 6,
        other => panic!("src/{other} has no layer: add it to ARCHITECTURE.md and to this test"),
    };
    let mut checked = 0;
    for (path, text) in sources("src") {
        let from = module_of(&path);
        for (at, _) in code(&text).match_indices("crate::") {
            let to: String = text[at + 7..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            // `fuzz` is test support (compiled only for tests): the property tests of any layer use it.
            if to.is_empty() || to == from || to == "fuzz" {
                continue;
            }
            assert!(rank(&to) < rank(&from), "{} (layer {from}) imports crate::{to}, a layer above or beside it", path.display());
            checked += 1;
        }
    }
    assert!(checked >= 100, "only {checked} imports seen");
}

/// A cloud's module uses only neutral modules and its own files, never another cloud's; the neutral files
/// of `src/clouds` (shared helpers, rate limiter) name no cloud's module; only the selectors do.
#[test]
fn no_cloud_imports_another_cloud() {
    const CLOUDS: [&str; 4] = ["aws", "azure", "gcp", "oci"];
    for (path, text) in sources("src/clouds") {
        let dir = path.parent().and_then(|d| d.file_name()).map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let code = code(&text);
        if let Some(own) = CLOUDS.iter().find(|c| **c == dir) {
            for other in CLOUDS.iter().filter(|c| *c != own) {
                for form in [format!("clouds::{other}"), format!("super::super::{other}"), format!("use super::{other}")] {
                    assert!(!code.contains(&form), "{} uses {form}: use crate::clouds::shared for what clouds share", path.display());
                }
            }
        } else if !["backend.rs", "rules.rs", "mod.rs"].contains(&file.as_str()) {
            for cloud in CLOUDS {
                for form in [format!("{cloud}::"), format!("super::{cloud}")] {
                    assert!(!code.contains(&form), "{} is neutral but uses {form}", path.display());
                }
            }
        }
    }
}

/// `src/resources` holds no per-cloud CRUD and chooses no cloud: every per-cloud step is a backend's.
#[test]
fn resources_hold_no_per_cloud_steps() {
    for (path, text) in sources("src/resources") {
        let code = code(&text);
        for word in [
            "fn aws_",
            "fn gcp_",
            "fn azure_",
            "fn oci_",
            "Cloud::Aws",
            "Cloud::Azure",
            "Cloud::Gcp",
            "Cloud::Oci",
            "clouds::aws",
            "clouds::azure",
            "clouds::gcp",
            "clouds::oci",
        ] {
            assert!(!code.contains(word), "{} has {word}: per-cloud steps belong in src/clouds/<cloud>/backend.rs", path.display());
        }
    }
}

/// No match on the cloud ends in a catch-all arm: a cloud added to `Cloud` must fail to compile wherever
/// it is not handled, never silently take another cloud's branch.
#[test]
fn no_match_on_the_cloud_has_a_fallback() {
    for (path, text) in sources("src") {
        let lines: Vec<&str> = code(&text).lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let trimmed = line.trim_start();
            if !trimmed.starts_with("_ =>") {
                continue;
            }
            let indent = line.len() - trimmed.len();
            for earlier in lines[..i].iter().rev() {
                let t = earlier.trim_start();
                let at = earlier.len() - t.len();
                if at < indent && !t.is_empty() {
                    break; // left the match
                }
                if at == indent && t.split("=>").next().is_some_and(|arm| arm.contains("Cloud::")) {
                    panic!("{}:{}: a match on the cloud falls back with `_ =>`; name every cloud", path.display(), i + 1);
                }
            }
        }
    }
}

/// Secrets are sensitive attributes: the CLI hides them in plans and logs.
#[test]
fn credentials_keys_and_user_data_are_sensitive() {
    use hpc_provider::framework::Type;
    use hpc_provider::framework::{Block, ProviderDefinition};
    /// The path of a secret inside a value of type `t` (an object's field named as a secret, at any depth).
    fn nested_secret(t: &Type, secret: &[&str]) -> Option<String> {
        match t {
            Type::Object(fields) => fields.iter().find_map(|(k, t)| {
                if secret.contains(&k.as_str()) { Some(k.clone()) } else { nested_secret(t, secret).map(|p| format!("{k}.{p}")) }
            }),
            Type::List(t) | Type::Set(t) | Type::Map(t) => nested_secret(t, secret),
            Type::Tuple(ts) => ts.iter().find_map(|t| nested_secret(t, secret)),
            _ => None,
        }
    }
    fn check(block: &Block, at: &str, secret: &[&str], found: &mut usize) {
        for a in &block.attributes {
            if secret.contains(&a.name.as_str()) {
                *found += 1;
                assert!(a.sensitive, "{at}.{} holds a secret but is not sensitive", a.name);
            }
            // An object that carries a secret (a fabric reference with its Slurm join) is as secret.
            if let Some(inner) = nested_secret(&a.ty, secret) {
                *found += 1;
                assert!(a.sensitive, "{at}.{} carries a secret ({}.{inner}) but is not sensitive", a.name, a.name);
            }
        }
        for b in &block.blocks {
            check(&b.block, &format!("{at}.{}", b.type_name), secret, found);
        }
    }
    // `slurm_join` holds the Slurm cluster's munge key.
    let secret = ["access_key", "secret_key", "token", "client_secret", "credentials", "private_key", "user_data", "slurm_join"];
    let provider = hpc_provider::provider::HpcProvider;
    let mut found = 0;
    check(&provider.schema().block, "provider", &secret, &mut found);
    for r in provider.resources() {
        check(&r.schema().block, r.type_name(), &secret, &mut found);
    }
    for d in provider.data_sources() {
        check(&d.schema().block, d.type_name(), &secret, &mut found);
    }
    assert!(found >= 7, "only {found} secret attributes found; the list above is stale");
}

/// The ownership rule is one neutral module, and every cloud's observe, converge and delete go through it:
/// each takes the `Census` that admits only the resource instance's own pieces.
#[test]
fn every_cloud_operation_on_pieces_goes_through_the_census() {
    let (_, ownership) = sources("src").into_iter().find(|(p, _)| p.ends_with("ownership.rs")).expect("src/ownership.rs");
    for layer in ["crate::clouds", "crate::resources", "crate::protocol"] {
        assert!(!ownership.contains(layer), "src/ownership.rs uses {layer}: the rule must not depend on a cloud or a resource");
    }
    let mut checked = 0;
    for cloud in ["aws", "gcp", "azure", "oci"] {
        for kind in ["fabric", "cluster", "filesystem"] {
            let path = format!("src/clouds/{cloud}/{kind}.rs");
            let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(&path)).unwrap();
            for op in ["observe", "converge", "delete"] {
                for (at, _) in text.match_indices(&format!("pub async fn {op}(")) {
                    let open = at + text[at..].find('{').unwrap();
                    let signature = &text[at..open];
                    assert!(signature.contains("Census"), "{path}: {op} does not take the census:\n{signature}");
                    // Taking it is not enough: the body must hand it on or ask it (admit, gate, ...).
                    let name = census_parameter(signature).unwrap_or_else(|| panic!("{path}: {op}: no census parameter in {signature}"));
                    let body = &text[open..open + body_len(&text[open..])];
                    assert!(
                        uses_name(body, &name),
                        "{path}: {op} takes the census as `{name}` and never uses it: its pieces would not be checked for their owner"
                    );
                    checked += 1;
                }
            }
        }
    }
    assert!(checked >= 30, "only {checked} operations found: the file layout changed");
}

/// The name of the `&Census` parameter in a function signature (`census: &Census` -> `census`).
fn census_parameter(signature: &str) -> Option<String> {
    let params = &signature[signature.find('(')? + 1..];
    let param = params.split(',').find(|p| p.contains("Census"))?;
    let name = param.split(':').next()?.trim();
    Some(name.to_owned()).filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
}

/// The length of the block that opens at the first character of `text` (a `{`), braces counted.
fn body_len(text: &str) -> usize {
    let mut depth = 0;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
    }
    text.len()
}

/// Whether `name` occurs in `code` as a whole identifier.
fn uses_name(code: &str, name: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    code.match_indices(name).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        let after = code[at + name.len()..].chars().next();
        !before.is_some_and(ident) && !after.is_some_and(ident)
    })
}

#[test]
fn the_census_checks_see_through_a_parameter_that_is_never_used() {
    let signature = "pub async fn observe(ctx: &Context, name: &str, census: &Census) -> Result<Live, String> ";
    assert_eq!(census_parameter(signature).as_deref(), Some("census"));
    let unused = "{ let censuses = 1; list(ctx, name).await }";
    assert!(!uses_name(&unused[..body_len(unused)], "census"));
    let used = "{ for p in list(ctx, name).await { census.admit(p) } }";
    assert!(uses_name(&used[..body_len(used)], "census"));
}

/// Where the `<name>-<number>` shape is written outside `src/nodes.rs` for something that is not a node,
/// each with why: the node-name check below must find exactly these (so the list cannot go stale).
const NUMBERED_NAMES_NOT_NODES: [(&str, &str, &str); 11] = [
    ("clouds/gcp/node_pool.rs", "\"{prefix}-{}\"", "GKE Network objects, one per GPU NIC network: `rdma-0`"),
    ("ownership.rs", "\"{}-{}\"", "an owner marker: the creation stamp, then random hex"),
    ("clouds/aws/mod.rs", "\"{first}-{last}\"", "a range of EFA network cards: `1-16`"),
    (
        "clouds/azure/filesystem.rs",
        "let tier = fs[\"sku\"][\"name\"].as_str().and_then(|s| s.rsplit('-').next()).and_then(|t| t.parse().ok()).unwrap_or(0)",
        "a Managed Lustre SKU's throughput tier: `AMLFS-Durable-Premium-250`",
    ),
    ("config.rs", "let parts: Vec<&str> = r.split('-').collect()", "an AWS region: `us-east-1`"),
    ("clouds/azure/cluster.rs", "\"{cluster}-{index}\"", "an Azure scale set: numbered apart from the nodes it holds"),
    ("clouds/mod.rs", "\"{name}-0\"", "name_range: numbered networks and subnetworks"),
    ("clouds/mod.rs", "\"{name}-0 .. {name}-{}\"", "name_range: numbered networks and subnetworks"),
    ("planner/nccl.rs", "\"{name}-{index}.{name}\"", "the NCCL test job's pod host names (Kubernetes indexed pods)"),
    ("clouds/slurm.rs", "\"{}-{i}\"", "the AWS tags holding a Slurm configuration's chunks: `hpc:slurm-config-0`"),
    ("planner/slurm.rs", "\"{}-{island}-nccl\"", "a Slurm job's name: a partition's NCCL test on its second RDMA fabric, `nd-nd-1-nccl`"),
];

/// Node names (`<cluster>-<i>`) and NVLink domain pieces (`<cluster>-nvl<k>`) are written and read only by
/// `src/nodes.rs`: every cloud finds its own nodes by reading back the names it wrote, so a second writer
/// or reader that differs on odd input (a `+`, a leading zero) adopts or loses nodes. Caught here: a string
/// literal with a placeholder, a `-` and a number or placeholder (`"{cluster}-{i}"`, `"{}-0"`), and a
/// statement that cuts a name at a `-` (`rsplit_once('-')`, `strip_prefix('-')`, `strip_prefix("-nvl")`, ...)
/// with a number parse in it or in the statement after it. Times are `-`-separated too: `src/clock.rs`.
#[test]
fn node_names_are_written_and_read_only_in_the_nodes_module() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    for (path, text) in sources("src") {
        let rel = path.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/");
        if rel == "nodes.rs" || rel == "clock.rs" {
            continue;
        }
        found.extend(node_name_handling(code(&text)).into_iter().map(|snippet| (rel.clone(), snippet)));
    }
    let unlisted: Vec<String> = found
        .iter()
        .filter(|(file, snippet)| !NUMBERED_NAMES_NOT_NODES.iter().any(|(f, s, _)| f == file && s == snippet))
        .map(|(file, snippet)| format!("src/{file}: {snippet}"))
        .collect();
    assert!(
        unlisted.is_empty(),
        "these write or read a node name themselves:\n{}\nuse crate::nodes (node_name, node_index, domain_name, ...), \
         or if one is not a node's name, add it with the reason to NUMBERED_NAMES_NOT_NODES",
        unlisted.join("\n")
    );
    for (file, snippet, why) in NUMBERED_NAMES_NOT_NODES {
        assert!(
            found.iter().any(|(f, s)| f == file && s == snippet),
            "NUMBERED_NAMES_NOT_NODES lists src/{file} {snippet} ({why}), no longer there"
        );
    }
}

#[test]
fn the_node_name_check_catches_a_planted_writer_and_reader() {
    let planted = r#"
        fn name(cluster: &str, i: u32) -> String { format!("{cluster}-{i}") }
        fn first(cluster: &str) -> String { format!("{}-0", cluster) }
        fn index(name: &str) -> Option<u32> { name.rsplit_once('-')?.1.parse::<u32>().ok() }
        fn index2(cluster: &str, name: &str) -> Option<u32> {
            let digits = name.strip_prefix(cluster)?.strip_prefix('-')?;
            digits.parse().ok()
        }
        fn domain(cluster: &str, name: &str) -> Option<u32> { name.strip_prefix(cluster)?.strip_prefix("-nvl")?.parse().ok() }
    "#;
    let found = node_name_handling(planted);
    assert_eq!(found.iter().filter(|s| s.starts_with('"')).collect::<Vec<_>>(), ["\"{cluster}-{i}\"", "\"{}-0\""]);
    let parses: Vec<&String> = found.iter().filter(|s| !s.starts_with('"')).collect();
    assert_eq!(parses.len(), 3, "{parses:?}");
    assert!(parses[0].contains("rsplit_once") && parses[1].contains("strip_prefix('-')") && parses[2].contains("-nvl"), "{parses:?}");
    // Names of other pieces, a region cut from a zone, and comments and char literals pass.
    let clean = r#"
        // a node is `<cluster>-<i>`, e.g. format!("{cluster}-{i}")
        fn subnet(fabric: &str, i: u32) -> String { format!("{fabric}-gpu-{i}") }
        fn template(c: &str) -> String { format!("{c}-lt") }
        fn region(zone: &str) -> &str { zone.rsplit_once('-').map_or(zone, |(r, _)| r) }
        fn quote() -> char { '"' }
        fn number(s: &str) -> Option<u32> { s.parse().ok() }
        const RAW: &str = r"{a}-{b}";
    "#;
    assert_eq!(node_name_handling(&clean[..clean.find("const RAW").unwrap()]), Vec::<String>::new());
    assert_eq!(node_name_handling(clean), ["\"{a}-{b}\""], "raw strings are read too");
}

/// The node-name writers and readers in `code` (see [`node_names_are_written_and_read_only_in_the_nodes_module`]):
/// offending string literals as written (with their quotes), then offending statements.
fn node_name_handling(code: &str) -> Vec<String> {
    let (literals, bare) = literals_and_code(code);
    let numbered =
        |lit: &str| lit.match_indices("}-").any(|(at, _)| lit[at + 2..].chars().next().is_some_and(|c| c == '{' || c.is_ascii_digit()));
    let mut out: Vec<String> = literals.into_iter().filter(|l| numbered(l)).collect();
    const CUTS: [&str; 7] =
        ["rsplit_once('-')", "split_once('-')", "strip_prefix('-')", "rsplit('-')", "split('-')", "'-')", "strip_prefix(\"-nvl\")"];
    let parses = |s: &str| s.contains(".parse()") || s.contains(".parse::<") || s.contains("from_str(");
    let statements: Vec<&str> = bare.split([';', '{', '}']).collect();
    for (i, s) in statements.iter().enumerate() {
        if CUTS.iter().any(|c| s.contains(c)) && (parses(s) || statements.get(i + 1).is_some_and(|next| parses(next))) {
            out.push(s.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
    out
}

/// The string literals of `code` (each with its quotes, raw ones as `"..."` too), and the code with
/// comments dropped and every string literal's text kept (so `strip_prefix("-nvl")` can still be seen).
fn literals_and_code(code: &str) -> (Vec<String>, String) {
    let chars: Vec<char> = code.chars().collect();
    let (mut literals, mut bare) = (Vec::new(), String::new());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '\'' && (chars.get(i + 2) == Some(&'\'') || chars.get(i + 1) == Some(&'\\')) {
            // A char literal (`'"'`, `'\''`); a lifetime (`'a`) is not followed by a quote two on.
            let end = (i + 1..chars.len()).find(|&j| chars[j] == '\'' && j > i + 1).unwrap_or(chars.len() - 1);
            bare.extend(&chars[i..=end]);
            i = end + 1;
        } else if c == '"'
            || (c == 'r'
                && matches!(chars.get(i + 1), Some('"' | '#'))
                && !chars[..i].last().is_some_and(|p| p.is_alphanumeric() || *p == '_'))
        {
            let hashes = if c == 'r' { chars[i + 1..].iter().take_while(|h| **h == '#').count() } else { 0 };
            let open = if c == 'r' { i + 1 + hashes } else { i };
            if chars.get(open) != Some(&'"') {
                bare.push(c);
                i += 1;
                continue;
            }
            let mut j = open + 1;
            let text_end = loop {
                if j >= chars.len() {
                    break chars.len();
                }
                if c != 'r' && chars[j] == '\\' {
                    j += 2;
                    continue;
                }
                if chars[j] == '"' && chars[j + 1..].iter().take(hashes).filter(|h| **h == '#').count() == hashes {
                    break j;
                }
                j += 1;
            };
            let text: String = chars[open + 1..text_end.min(chars.len())].iter().collect();
            literals.push(format!("\"{text}\""));
            bare.push('"');
            bare.push_str(&text);
            bare.push('"');
            i = text_end + 1 + hashes;
        } else {
            bare.push(c);
            i += 1;
        }
    }
    (literals, bare)
}

/// Times are read from the clock, written, parsed and rounded only in `src/clock.rs`: a second date
/// reader disagrees on odd input (four rounded to the minute, each its own way).
#[test]
fn times_are_handled_only_in_the_clock_module() {
    let mut checked = 0;
    for (path, text) in sources("src") {
        if path.ends_with("clock.rs") {
            continue;
        }
        for word in ["UNIX_EPOCH", "civil_from_days", "days_from_civil", "86_400", "86400", "DateTimeFormat", "1440"] {
            assert!(!code(&text).contains(word), "{} uses {word}: write, parse or round times with crate::clock", path.display());
        }
        checked += 1;
    }
    assert!(checked >= 50, "only {checked} files seen");
}

/// Where the code of a file retries a request or runs a wait of its own: a sleep, a deadline, an attempt
/// counter or a doubling delay. `clouds/retry.rs` (the retry policy), `clouds/shared.rs` (the poll loop)
/// and `clouds/throttle.rs` (the request buckets) are the only places these belong.
fn own_retries_and_waits(code: &str) -> Vec<&'static str> {
    ["time::sleep(", "sleep(delay", "Instant::now() +", "ATTEMPTS", "for attempt in", "attempt +=", "delay * 2", "delay *= 2"]
        .into_iter()
        .filter(|w| code.contains(w))
        .collect()
}

/// One request-retry policy (`clouds::retry`, which the AWS SDK is configured from) and one poll loop
/// (`shared::Poll`) for every cloud and every long wait: no other file under `src/clouds` or
/// `src/resources` sleeps, keeps a deadline, counts attempts or doubles a delay.
#[test]
fn requests_are_retried_and_waits_polled_in_one_place() {
    let allowed = ["retry.rs", "shared.rs", "throttle.rs"];
    let mut checked = 0;
    for dir in ["src/clouds", "src/resources"] {
        for (path, text) in sources(dir) {
            if dir == "src/clouds" && path.parent().is_some_and(|p| p.ends_with("clouds")) && allowed.iter().any(|a| path.ends_with(a)) {
                continue;
            }
            let found = own_retries_and_waits(code(&text));
            assert!(
                found.is_empty(),
                "{} retries or waits by itself ({found:?}): send requests through clouds::retry::send and poll with shared::Poll",
                path.display()
            );
            checked += 1;
        }
    }
    assert!(checked >= 40, "only {checked} files seen");
    let retry = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/clouds/retry.rs")).unwrap();
    assert!(!own_retries_and_waits(code(&retry)).is_empty(), "the scan no longer recognises the retry policy's own loop");
    for cloud in ["gcp", "azure", "oci"] {
        let api = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("src/clouds/{cloud}/api.rs"))).unwrap();
        assert!(api.contains("retry::send("), "{cloud}'s requests do not go through the one retry policy");
    }
    let aws = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/clouds/aws/api.rs")).unwrap();
    assert!(aws.contains("retry::POLICY"), "the AWS SDK's retries are not configured from the one policy");
}

#[test]
fn the_retry_check_catches_a_planted_loop() {
    let planted = "async fn get() { let mut delay = D; for attempt in 1..=ATTEMPTS { tokio::time::sleep(delay).await; delay *= 2; } }";
    assert_eq!(own_retries_and_waits(planted), ["time::sleep(", "sleep(delay", "ATTEMPTS", "for attempt in", "delay *= 2"]);
    assert!(own_retries_and_waits("let poll = Poll::new(ctx, what, timeout); poll.pause(None).await?;").is_empty());
}
