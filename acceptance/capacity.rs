//! Capacity before money, on every cloud with the real CLIs: a plan that needs more quota than the cloud
//! has free is refused before anything is made, naming the quota, what the plan needs, what is free and how
//! to ask for more; under `all-or-nothing` an apply that gets 3 of 4 nodes leaves none running and the state
//! saying so; under `at-least` 2 it keeps the 3, warns, and the next plan adds the fourth.

use serde_json::{Value, json};

use crate::cli::{Cli, Workdir, fold};

/// The emulator's admin API: method, route, body.
pub type AdminFn = Box<dyn Fn(&str, &str, Option<Value>) -> Value>;

/// One cloud's capacity case (`acceptance/cases/capacity_<cloud>`), from `crate::<cloud>::capacity_setup`.
pub struct Capacity {
    pub w: Workdir,
    pub admin: AdminFn,
    /// The quota the case's nodes draw on (on-demand), its scope and the cloud's name for it.
    pub quota_id: String,
    pub quota_scope: String,
    pub quota_name: String,
    /// Units of the quota one node takes.
    pub per_node: u64,
    /// Where the nodes launch, for the emulator's capacity limit.
    pub zone: String,
    pub instance_type: String,
    /// The names of cluster `cap`'s live nodes, from the cloud's own API.
    pub live: Box<dyn Fn() -> Vec<String>>,
    pub _keep: Box<dyn std::any::Any>,
}

fn setup(cli: &Cli, cloud: &str) -> Capacity {
    match cloud {
        "aws" => crate::aws::capacity_setup(cli),
        "gcp" => crate::gcp::capacity_setup(cli),
        "azure" => crate::azure::capacity_setup(cli),
        "oci" => crate::oci::capacity_setup(cli),
        other => panic!("no cloud {other}"),
    }
}

impl Capacity {
    fn quota(&self, limit: u64) {
        (self.admin)("POST", "quota", Some(json!({"id": self.quota_id, "scope": self.quota_scope, "limit": limit})));
    }

    fn capacity(&self, available: Option<u64>) {
        (self.admin)("POST", "capacity", Some(json!({"zone": self.zone, "instance_type": self.instance_type, "available": available})));
    }

    fn live_count(&self) -> usize {
        (self.live)().len()
    }

    fn empty(&self) {
        let inv = (self.admin)("GET", "inventory", None);
        assert_eq!(inv["empty"], true, "{inv}");
    }
}

fn run(w: &Workdir, args: &[&str], code: i32) -> String {
    fold(&w.run(args).expect_code(code).output())
}

fn apply(w: &Workdir, code: i32) -> String {
    run(w, &["apply", "-no-color", "-input=false", "-auto-approve"], code)
}

fn plan(w: &Workdir, code: i32) -> String {
    run(w, &["plan", "-no-color", "-input=false", "-detailed-exitcode"], code)
}

fn destroy(w: &Workdir) {
    run(w, &["destroy", "-no-color", "-input=false", "-auto-approve"], 0);
}

/// The cluster's state: its node count and the names its `nodes` lists.
fn state_nodes(w: &Workdir) -> (u64, Vec<String>) {
    let values = crate::cli::state_values(w);
    let c = &values["hpc_gpu_cluster.c"];
    let names = c["nodes"].as_array().into_iter().flatten().filter_map(|n| n["name"].as_str().map(str::to_owned)).collect();
    (c["node_count"].as_u64().unwrap_or(0), names)
}

/// The names of the live nodes, sorted, as the cloud lists them.
fn live_names(c: &Capacity) -> Vec<String> {
    let mut names = (c.live)();
    names.sort();
    names
}

/// Quota in the plan, and the all-or-nothing and at-least policies, on one cloud.
pub fn quota_and_policies(cli: &Cli, cloud: &str) {
    let c = setup(cli, cloud);
    let w = &c.w;
    let p = c.per_node;

    // 1. Quota for 3 nodes: the plan for 4 is refused before anything is made, with the figures.
    c.quota(3 * p);
    (c.admin)("DELETE", "counters", None);
    let refused = plan(w, 1);
    let at_four = (c.admin)("GET", "counters", None);
    for part in [
        "Not enough".to_owned(),
        "quota for cap".to_owned(),
        format!("{:?} ({})", c.quota_name, c.quota_id),
        format!("adds 4 x {} in {}", c.instance_type, c.quota_scope),
        format!("The quota is {}", 3 * p),
        format!("{} free", 3 * p),
        format!("Ask for at least {}", 4 * p),
    ] {
        assert!(refused.contains(&part), "{part}: {refused}");
    }
    assert_eq!(c.live_count(), 0);
    c.empty();
    // The check's calls do not grow with the nodes.
    w.write("terraform.tfvars", "node_count = 8\n");
    (c.admin)("DELETE", "counters", None);
    let eight = plan(w, 1);
    assert!(eight.contains(&format!("Ask for at least {}", 8 * p)), "{eight}");
    assert_eq!((c.admin)("GET", "counters", None), at_four, "the quota check's calls grew with the nodes");
    // quota_check = "warning" plans it with the same figures as a warning.
    w.write("terraform.tfvars", "quota_check = \"warning\"\n");
    let warned = plan(w, 2);
    assert!(warned.contains("Warning: Not enough") && warned.contains(&format!("Ask for at least {}", 4 * p)), "{warned}");

    // 2. Quota enough, capacity for 3 in the zone: all-or-nothing keeps no node, and the state says so.
    c.quota(100 * p);
    c.capacity(Some(3));
    w.write("terraform.tfvars", "");
    let failed = apply(w, 1);
    assert!(failed.contains(&format!("Not enough {} capacity in {}", c.instance_type, c.zone)), "{failed}");
    assert!(failed.contains("capacity_policy = \"all-or-nothing\" keeps none of them") && failed.contains("0 node(s) run"), "{failed}");
    assert!(failed.contains("What can help: another"), "{failed}");
    assert_eq!(live_names(&c), Vec::<String>::new());
    assert_eq!(state_nodes(w), (0, vec![]));
    // The next plan makes the 4 again: an update of the cluster's remaining pieces (AWS: the launch
    // template), or a create where no piece of it is left (Google Cloud: its nodes are all it has).
    let again = plan(w, 2);
    assert!(again.contains("node_count = 0 -> 4") || again.contains("hpc_gpu_cluster.c will be created"), "{again}");

    // 3. at-least 2: the 3 that come are kept with a warning; the next plan adds the fourth.
    w.write("terraform.tfvars", "capacity_policy = \"at-least\"\nmin_nodes = 2\n");
    let kept = apply(w, 0);
    assert!(kept.contains("3 of 4 nodes: capacity short") && kept.contains("the next plan adds the missing 1"), "{kept}");
    let live = live_names(&c);
    assert_eq!(live.len(), 3, "{live:?}");
    assert_eq!(state_nodes(w).1.len(), 3);
    let rest = plan(w, 2);
    assert!(rest.contains("3 -> 4"), "{rest}");
    c.capacity(None);
    apply(w, 0);
    assert_eq!(c.live_count(), 4);
    plan(w, 0);
    destroy(w);
    c.empty();
}

/// The fault suite's "partial capacity": each policy with 3 of 4 nodes available while 30% of calls are
/// throttled ends with the state matching the cloud, and destroy leaves nothing behind.
pub fn partial_capacity(cli: &Cli, cloud: &str) {
    let c = setup(cli, cloud);
    let w = &c.w;
    c.capacity(Some(3));
    for (vars, code, running) in [
        ("capacity_policy = \"keep-partial\"\n", 1, 3),
        ("capacity_policy = \"all-or-nothing\"\n", 1, 0),
        ("capacity_policy = \"at-least\"\nmin_nodes = 2\n", 0, 3),
    ] {
        w.write("terraform.tfvars", vars);
        (c.admin)("POST", "faults", Some(json!({"service": "*", "operation": "*", "kind": "throttle", "probability": 0.3, "seed": 11})));
        let out = apply(w, code);
        (c.admin)("DELETE", "faults", None);
        let live = live_names(&c);
        assert_eq!(live.len(), running, "{vars}: {live:?}\n{out}");
        let mut listed = state_nodes(w).1;
        listed.sort();
        assert_eq!(listed, live, "{vars}: the state does not match the cloud\n{out}");
        destroy(w);
        c.empty();
    }
}
