//! `resource "hpc_slurm_cluster"`: Slurm over GPU clusters of one fabric. A controller (and optionally a
//! backup) and login nodes, made on the fabric's network in a subnet of their own; partitions, each the
//! nodes of one `hpc_gpu_cluster`; and the whole configuration rendered in the plan (`planner::slurm`)
//! from the facts that placed the nodes. The clusters join by themselves (`hpc_gpu_cluster.slurm`, from the
//! fabric's `slurm_join`), so the Slurm cluster refers to the clusters and they do not refer to it.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;

use super::common::{self, fabric_ref_type};
use super::lifecycle::{Kind, NoParts, Timeouts};
use crate::clouds::backend;
use crate::framework::{
    ApplyRequest, ApplyResponse, Attribute, Block, Context, Diagnostics, NestedBlock, PlanRequest, PlanResponse, ReadOutcome, Resource,
    Schema, Type, Value,
};
use crate::model::SlurmSpec;
use crate::planner::{self, expansion_type, expansion_value, spec};

pub struct SlurmCluster;

pub const KIND: common::Kind = common::Kind { type_name: "hpc_slurm_cluster", noun: "Slurm cluster" };

/// `fabric = hpc_gpu_fabric.x`: the fabric's reference with its network and what joining its Slurm takes.
pub fn slurm_fabric_type() -> Type {
    let Type::Object(mut fields) = fabric_ref_type() else { unreachable!("a fabric reference is an object") };
    fields.insert("cidr_block".into(), Type::String);
    fields.insert("slurm_join".into(), super::gpu_fabric::slurm_join_type());
    Type::Object(fields)
}

/// `cluster = hpc_gpu_cluster.x` in a partition: what Slurm needs of the cluster.
pub fn partition_cluster_type() -> Type {
    Type::object([
        ("name", Type::String),
        ("fabric", fabric_ref_type()),
        ("instance_type", Type::String),
        ("node_names", Type::list(Type::String)),
        ("placement_groups", Type::list(Type::object([("name", Type::String), ("nodes", Type::list(Type::String))]))),
        ("nvlink_domains", Type::list(Type::object([("name", Type::String), ("nodes", Type::list(Type::String)), ("gpus", Type::Number)]))),
    ])
}

/// The rendered files, which the controllers and login nodes read from their metadata (see
/// [`SlurmCluster::plan`]).
const RENDERED: [&str; 5] = ["slurm_conf", "gres_conf", "cgroup_conf", "topology_conf", "topology_yaml"];

pub fn schema() -> Schema {
    let timeouts = Block::new("How long create, update and delete may take (e.g. `30m`).")
        .attribute(Attribute::optional("create", Type::String, "Default 30m."))
        .attribute(Attribute::optional("update", Type::String, "Default 30m."))
        .attribute(Attribute::optional("delete", Type::String, "Default 30m."));
    let partition = Block::new("A partition: the nodes of one GPU cluster on the same fabric.")
        .attribute(Attribute::required("name", Type::String, "Partition name (1-64 letters, digits, `-`, `_`, `.`; not `default`)."))
        .attribute(Attribute::required(
            "cluster",
            partition_cluster_type(),
            "The cluster whose nodes the partition holds: `cluster = hpc_gpu_cluster.<name>`, on the same fabric.",
        ))
        .attribute(Attribute::optional("default", Type::Bool, "The default partition (at most one; the first when none is)."))
        .attribute(Attribute::optional(
            "max_time",
            Type::String,
            "Longest job, as Slurm reads `MaxTime`: minutes (`90`), `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`, `D-HH:MM:SS` (`7-00:00:00`), or `INFINITE` / `UNLIMITED`; default `INFINITE`.",
        ));
    let text = |name: &str, doc: &str| Attribute::computed(name, Type::String, doc);
    Schema::new(
        1,
        Block::new(
            "Slurm over GPU clusters of one fabric: a controller (and optionally a backup) and login nodes on the fabric's network, and \
             partitions of the clusters' nodes, with slurm.conf, gres.conf, cgroup.conf and the topology rendered in the plan from the \
             facts that placed the nodes.",
        )
        .attribute(Attribute::required("name", Type::String, "Cluster name (`ClusterName`) and prefix of every piece (1-40 lowercase letters, digits, hyphens).").requires_replace())
        .attribute(Attribute::required(
            "fabric",
            slurm_fabric_type(),
            "The fabric whose network it is on: `fabric = hpc_gpu_fabric.<name>`, with `slurm = true` on the fabric. Sensitive: it \
             carries the fabric's `slurm_join`, whose key authenticates every daemon of the cluster.",
        )
        .requires_replace()
        .sensitive())
        .attribute(Attribute::required(
            "slurm_version",
            Type::String,
            "The Slurm version the images run, which the configuration is written for: 21.08, 22.05, 23.02, 23.11, 24.05, 24.11, 25.05 or \
             25.11 (the clouds' stock Ubuntu 22.04 GPU images install 21.08, Debian 12 22.05, Ubuntu 24.04 23.11).",
        )
        .requires_replace())
        .attribute(Attribute::optional_computed("controller_instance_type", Type::String, "The controllers' instance type; default 8 vCPUs, 32 GiB (m7i.2xlarge, Standard_D8s_v5, n2-standard-8, VM.Standard.E5.Flex).").requires_replace())
        .attribute(Attribute::optional("backup_controller", Type::Bool, "A second controller (`SlurmctldHost`). Not supported yet, and refused at plan: a backup takes over with slurmctld's state, which must be on storage both controllers mount, and nothing mounts shared storage on them yet (a later release brings it).").requires_replace())
        .attribute(Attribute::optional_computed("state_save_location", Type::String, "Where slurmctld keeps its state (`StateSaveLocation`), on the controller's own disk: an absolute path of letters, digits, `/`, `.`, `_`, `-`; default `/var/spool/slurmctld`.").requires_replace())
        .attribute(Attribute::optional_computed("login_instance_type", Type::String, "The login nodes' instance type; default as the controllers'.").requires_replace())
        .attribute(Attribute::optional_computed("login_nodes", Type::Number, "Login nodes, 0 to 16; default 1.").requires_replace())
        .attribute(Attribute::optional_computed(
            "topology",
            Type::String,
            "`auto` (default: one block per NVLink domain for rack-scale partitions where the version has topology/block, tree otherwise), \
             `tree` (one leaf switch per placement group or NVLink domain), `block`, or `none`.",
        ))
        .attribute(Attribute::optional_computed("health_check_interval", Type::Number, "Seconds between Slurm's health checks of a node (`HealthCheckInterval`, a 16-bit number in slurm.conf), from 30 to 65535; default 300."))
        .attribute(Attribute::optional("image", Type::String, "Image of the controllers and login nodes; default the clusters' default image, so that both install the same Slurm.").requires_replace())
        .attribute(Attribute::optional("ssh_public_key", Type::String, "SSH public key for the login nodes and controllers (required on Azure).").requires_replace())
        .attribute(Attribute::optional("tags", Type::map(Type::String), "Tags on every piece, after the provider's `default_tags`."))
        .attribute(Attribute::optional(
            "accounting",
            Type::Bool,
            "Job accounting: `slurmdbd` on the primary controller with a MariaDB beside it (installed where the image lacks it; \
             slurmdbd reaches it over its local socket as the `slurm` user, so no password exists), so that `sacct` and \
             `sreport` show every job on every host. Default false. The history lives on the controller's disk: a controller \
             made again starts it anew. Changing it makes the controllers and login nodes again (their first boot sets slurmdbd up; \
             a running controller given accounting in place would wait for a slurmdbd it does not have).",
        ).requires_replace())
        .attribute(Attribute::optional(
            "custom_settings",
            Type::map(Type::String),
            "slurm.conf parameters of your own, written after the provider's (as ParallelCluster's `CustomSlurmSettings`): \
             `{ SchedulerParameters = \"bf_continue\" }`. Each name must be one the `slurm_version`'s parser knows and not one the \
             provider writes (the cluster name, controllers, plugins, nodes, partitions, health check: set those through their \
             attributes); each value one word. A change is written in place, as any change of the configuration.",
        ))
        .attribute(Attribute::computed("id", Type::String, "Identifier of the Slurm cluster, assigned when it is created.").assigned_at_apply())
        .attribute(Attribute::computed("owner", Type::String, common::OWNER_DOC).assigned_at_apply())
        .attribute(Attribute::computed("control_subnet", Type::String, "The subnet of the controllers and login nodes: the fabric network's last /28."))
        .attribute(Attribute::computed("controller_address", Type::String, "The controller's address (`SlurmctldHost`), fixed in the control subnet: what the nodes' `slurmd --conf-server` asks."))
        .attribute(Attribute::computed("backup_controller_address", Type::String, "The backup controller's address; null without one."))
        .attribute(Attribute::computed("login_addresses", Type::list(Type::String), "The login nodes' addresses.").assigned_at_apply())
        .attribute(Attribute::computed("login_command", Type::String, "How to log in: SSH to the first login node (the controller without one), from a host that reaches the fabric's network.").assigned_at_apply())
        .attribute(text("slurm_conf", "`slurm.conf`: configless (the nodes fetch it from the controller), the nodes with their type's sockets, cores, threads, memory and GPUs as `State=CLOUD`, the partitions (a job without `--mem` gets its GPUs' share of memory), the topology plugin and the health check."))
        .attribute(text("gres_conf", "`gres.conf`: each node type's GPUs with their type and device files."))
        .attribute(text("cgroup_conf", "`cgroup.conf`: jobs get the cores, memory and GPUs they asked for (from Slurm 22.05; 21.08 has no cgroup v2, so nothing is constrained and the plan says so)."))
        .attribute(text("slurmdbd_conf", "`slurmdbd.conf` with `accounting` (on the primary controller only, root's and slurm's alone); null without."))
        .attribute(text("topology_conf", "`topology.conf` for the tree or block plugin; null with `topology.yaml` or none."))
        .attribute(text("topology_yaml", "`topology.yaml` (25.05 and later): a tree of every node and a block topology of the rack-scale partitions' NVLink domains, which those partitions name."))
        .attribute(Attribute::computed("config_revision", Type::String, "The configuration's revision (a digest of the files), which the controllers' and login nodes' metadata carries with the files; a refresh reads it back, so a configuration changed outside shows in the plan and the apply writes it again."))
        .attribute(Attribute::computed("topology_plugin", Type::String, "The topology the configuration uses: `topology/tree`, `topology/block`, `topology.yaml` or `none`."))
        .attribute(text("healthcheck_program", "Slurm's `HealthCheckProgram` on the nodes: runs the node self-check again, drains a node that fails it with the reason, resumes one it drained."))
        .attribute(Attribute::computed("nccl_tests", Type::map(Type::String), "An `sbatch`-ready NCCL all-reduce per partition, over all its nodes (on a block topology from Slurm 24.05, in whole NVLink domains with `--segment`): `sbatch` the value on a login node. A partition whose nodes are on several RDMA fabrics (the plan says so) has one per fabric: the first under the partition's name, the others under `<partition>/<fabric>`. The log is written on the job's first node, in `/var/tmp/<partition>-nccl-<job id>.log` (no shared storage yet): copy it from there and check it with `data \"hpc_nccl_check\"`."))
        .attribute(Attribute::computed("expansion", expansion_type(), "The vendor pieces this Slurm cluster is made of, as planned."))
        .block(NestedBlock { min_items: 1, ..NestedBlock::list("partition", partition, 0) })
        .block(NestedBlock::single("timeouts", timeouts)),
    )
}

fn derive(ctx: &Context, config: &Value, diags: &mut Diagnostics) -> Option<BTreeMap<String, Value>> {
    // An import's configuration names the fabric without its id (the first plan takes the configuration's):
    // what it rebuilt from the cloud stands as it is.
    if imported(config) {
        return Some(BTreeMap::new());
    }
    let spec = spec::parse_slurm(config, diags)?;
    let plan = planner::slurm::plan(&spec, diags)?;
    let pieces = crate::clouds::expander(spec.fabric.cloud).slurm(&spec, &plan, &common::defaults(ctx));
    let text = |s: &Option<String>| s.as_deref().map_or(Value::Null, Value::from);
    let mut out = BTreeMap::new();
    out.insert("controller_instance_type".into(), Value::from(spec.controller_type.as_str()));
    out.insert("login_instance_type".into(), Value::from(spec.login_type.as_str()));
    out.insert("login_nodes".into(), Value::int(i64::from(spec.login_nodes)));
    out.insert("state_save_location".into(), Value::from(spec.state_save_location.as_str()));
    out.insert("topology".into(), Value::from(spec.topology.as_str()));
    out.insert("health_check_interval".into(), Value::int(i64::from(spec.health_check_interval)));
    out.insert("control_subnet".into(), Value::from(plan.control_subnet.as_str()));
    out.insert("controller_address".into(), Value::from(plan.controllers[0].1.as_str()));
    out.insert("backup_controller_address".into(), plan.controllers.get(1).map_or(Value::Null, |c| Value::from(c.1.as_str())));
    out.insert("slurm_conf".into(), Value::from(plan.slurm_conf.as_str()));
    out.insert("gres_conf".into(), Value::from(plan.gres_conf.as_str()));
    out.insert("cgroup_conf".into(), Value::from(plan.cgroup_conf.as_str()));
    out.insert("slurmdbd_conf".into(), text(&plan.slurmdbd_conf));
    out.insert("topology_conf".into(), text(&plan.topology.conf));
    out.insert("topology_yaml".into(), text(&plan.topology.yaml));
    let config = crate::clouds::slurm::slurm_config(&plan, None);
    if !crate::clouds::expander(spec.fabric.cloud).slurm_fits(&spec, &config, &common::defaults(ctx), diags) {
        return None;
    }
    out.insert("config_revision".into(), Value::from(config.revision));
    out.insert("topology_plugin".into(), Value::from(plan.topology.kind));
    out.insert("healthcheck_program".into(), Value::from(plan.healthcheck.as_str()));
    out.insert("nccl_tests".into(), Value::Map(plan.nccl_tests.into_iter().map(|(k, v)| (k, Value::from(v))).collect()));
    out.insert("expansion".into(), expansion_value(&pieces));
    Some(out)
}

/// Whether a configuration or state is an import's not applied yet: its fabric reference has no id (a
/// configuration's is known, or unknown while the fabric is made).
fn imported(v: &Value) -> bool {
    v.get("fabric").get("id").is_null()
}

/// What an imported Slurm cluster's first plan takes from the configuration without making it again.
const IMPORT_TAKES: [&str; 3] = ["fabric", "image", "ssh_public_key"];

#[async_trait]
impl Resource for SlurmCluster {
    fn type_name(&self) -> &'static str {
        KIND.type_name
    }

    fn schema(&self) -> Schema {
        schema()
    }

    fn validate(&self, config: &Value, diags: &mut Diagnostics) {
        if let Some(spec) = spec::parse_slurm(config, diags) {
            planner::slurm::plan(&spec, diags);
        }
    }

    /// The plan; a change of the rendered configuration (a partition's nodes, the topology) is an update in
    /// place: the apply writes it into the controllers' and login nodes' metadata, which they read within a
    /// minute (slurmctld restarted with its state, `scontrol reconfigure` for the nodes). The plan says so,
    /// and says when the hosts carry a configuration changed outside.
    fn plan(&self, ctx: &Context, req: PlanRequest<'_>, diags: &mut Diagnostics) -> PlanResponse {
        let prior = req.prior;
        let just_imported = req.prior_private == crate::framework::resource::IMPORTED_PRIVATE;
        let mut resp = common::plan(&schema(), req, diags, |config, diags| derive(ctx, config, diags));
        // Imported and not applied yet (the import's private state says so): the fabric, image and SSH key are
        // the configuration's where the cloud does not give them back as the configuration says them (an
        // image the hosts were made from by default, a key AWS hosts do not take), taken in place; the hosts
        // are not made again.
        if !prior.is_null() && (imported(prior) || just_imported) {
            resp.requires_replace.retain(|p| !IMPORT_TAKES.iter().any(|a| *p == crate::framework::AttributePath::attr(a)));
        }
        // Left out or written as its default (one login node, no backup controller), it is the same cluster: an
        // import records the count, a configuration may leave it out.
        if !prior.is_null() && !resp.planned.is_null() {
            let logins = |v: &Value| v.get("login_nodes").as_number().and_then(|n| n.as_i64()).unwrap_or(1);
            let backup = |v: &Value| v.get("backup_controller").as_bool().unwrap_or(false);
            let same =
                [("login_nodes", logins(prior) == logins(&resp.planned)), ("backup_controller", backup(prior) == backup(&resp.planned))];
            resp.requires_replace.retain(|p| !same.iter().any(|(a, same)| *same && *p == crate::framework::AttributePath::attr(a)));
        }
        if prior.is_null() || resp.planned.is_null() || resp.planned.get("config_revision") == prior.get("config_revision") {
            return resp;
        }
        let changed: Vec<&str> = RENDERED.into_iter().filter(|a| resp.planned.get(a) != prior.get(a)).collect();
        let what = if changed.is_empty() {
            format!(
                "The controllers and login nodes carry configuration {} instead of the one this state made (changed outside, or not \
                 written yet): the apply writes {} again.",
                prior.get("config_revision").as_str().unwrap_or("none"),
                resp.planned.get("config_revision").as_str().unwrap_or_default()
            )
        } else {
            format!(
                "{} change: the apply writes the new configuration into the controllers' and login nodes' metadata, and within a \
                 minute they take it: the controller restarts slurmctld (its state is kept, running and queued jobs go on) and sends \
                 it to the nodes (scontrol reconfigure). Nothing is made again. A node removed from a partition is gone from Slurm \
                 with its jobs: drain it first.",
                changed.join(", ")
            )
        };
        diags.warning_at(crate::framework::AttributePath::attr("partition"), "The Slurm configuration changes", what);
        resp
    }

    async fn apply(&self, ctx: &Context, req: ApplyRequest<'_>, diags: &mut Diagnostics) -> ApplyResponse {
        LIFECYCLE.apply(ctx, &req, diags).await
    }

    async fn read(&self, ctx: &Context, state: &Value, private: &[u8], diags: &mut Diagnostics) -> ReadOutcome {
        LIFECYCLE.read(ctx, state, private, diags).await
    }

    fn identity_schema(&self) -> Option<crate::framework::IdentitySchema> {
        Some(common::identity_schema())
    }

    fn identity(&self, state: &Value) -> Option<Value> {
        common::identity(state)
    }

    fn import_id(&self, identity: &Value) -> Result<String, String> {
        common::import_id(identity)
    }

    async fn import(&self, ctx: &Context, id: &str, diags: &mut Diagnostics) -> Option<Value> {
        let state = LIFECYCLE.import(ctx, id, "aws/us-east-1/ml", diags).await?;
        Some(with_what_it_runs_on(ctx, id, state, diags).await)
    }

    fn upgrade(&self, version: i64, state: Value, _diags: &mut Diagnostics) -> Value {
        common::upgrade_owner(KIND, version, state)
    }
}

/// The id of a piece named `name` in the same place as the piece `id` names (`gcp/us-central1-a/ml` and
/// `train` give `gcp/us-central1-a/train`).
fn sibling_id(id: &str, name: &str) -> String {
    match id.rsplit_once('/') {
        Some((place, _)) => format!("{place}/{name}"),
        None => name.to_owned(),
    }
}

/// `value`'s fields of object type `ty`, those it lacks null.
fn shaped(ty: &Type, value: &Value) -> Value {
    match ty {
        Type::Object(fields) => Value::Map(fields.keys().map(|k| (k.clone(), value.get(k).clone())).collect()),
        _ => value.clone(),
    }
}

/// What diagnostics say, in one line.
fn said(d: &Diagnostics) -> String {
    let all: Vec<String> = d.iter().map(|x| format!("{}: {}", x.summary, x.detail)).collect();
    if all.is_empty() { "nothing found".into() } else { all.join("; ") }
}

/// The partitions slurm.conf names, each as (name, the cluster its nodes are of, default, MaxTime).
fn partitions_of(conf: &str) -> Vec<(String, String, bool, String)> {
    conf.lines()
        .filter_map(|l| l.strip_prefix("PartitionName="))
        .filter_map(|l| {
            let word = |key: &str| l.split_whitespace().find_map(|w| w.strip_prefix(&format!("{key}="))).map(str::to_owned);
            let name = l.split_whitespace().next()?.to_owned();
            let nodes = word("Nodes")?;
            // `train-[0-3]` or `train-0`: the cluster is the name before the node numbers.
            let cluster = match nodes.split_once("-[") {
                Some((c, _)) => c.to_owned(),
                None => nodes.rsplit_once('-')?.0.to_owned(),
            };
            Some((name, cluster, word("Default").as_deref() == Some("YES"), word("MaxTime").unwrap_or_else(|| "INFINITE".into())))
        })
        .collect()
}

/// An imported Slurm cluster with what it runs on, as its configuration gives it: the fabric (imported by its
/// id, with the Slurm join its nodes carry, key included) and a partition per partition of the hosts'
/// slurm.conf over the GPU cluster whose nodes it holds (imported too). From those, what the plan derives and
/// the cloud does not hold (the NCCL tests, the expansion) is derived, so that outputs over them hold after
/// the import and the next plan has nothing to change. What cannot be found is left as the cloud gave it,
/// with a warning.
async fn with_what_it_runs_on(ctx: &Context, id: &str, state: Value, diags: &mut Diagnostics) -> Value {
    let Value::Map(mut map) = state else { return state };
    let fabric_name = map.get("fabric").map(|f| f.get("name").as_str().unwrap_or_default().to_owned()).unwrap_or_default();
    let mut found = Diagnostics::new();
    let fabric = super::gpu_fabric::GpuFabric.import(ctx, &sibling_id(id, &fabric_name), &mut found).await;
    let fabric = match fabric {
        Some(f) => shaped(&slurm_fabric_type(), &f),
        None => {
            diags.warning(
                "Slurm cluster imported without its fabric",
                format!(
                    "Fabric {fabric_name} could not be imported beside it ({}): the first plan takes the fabric from the configuration.",
                    said(&found)
                ),
            );
            shaped(&slurm_fabric_type(), map.get("fabric").unwrap_or(&Value::Null))
        }
    };
    map.insert("fabric".into(), fabric);
    let conf = map.get("slurm_conf").and_then(|c| c.as_str()).unwrap_or_default().to_owned();
    let mut partitions = Vec::new();
    for (name, cluster, default, max_time) in partitions_of(&conf) {
        let mut d = Diagnostics::new();
        let Some(nodes) = super::gpu_cluster::GpuCluster.import(ctx, &sibling_id(id, &cluster), &mut d).await else {
            diags.warning(
                "Slurm partition imported without its cluster",
                format!("Partition {name}'s nodes are of cluster {cluster}, which could not be imported ({}).", said(&d)),
            );
            partitions.clear();
            break;
        };
        let mut p = BTreeMap::new();
        p.insert("name".into(), Value::from(name));
        p.insert("cluster".into(), shaped(&partition_cluster_type(), &nodes));
        p.insert("default".into(), if default { Value::from(true) } else { Value::Null });
        p.insert("max_time".into(), if max_time == "INFINITE" { Value::Null } else { Value::from(max_time) });
        partitions.push(Value::Map(p));
    }
    if partitions.is_empty() {
        return Value::Map(map);
    }
    map.insert("partition".into(), Value::list(partitions));
    // What the plan derives from this configuration and the cloud does not hold.
    let mut d = Diagnostics::new();
    match derive(ctx, &Value::Map(map.clone()), &mut d) {
        Some(derived) => {
            for attr in ["nccl_tests", "expansion"] {
                if let Some(v) = derived.get(attr) {
                    map.insert(attr.into(), v.clone());
                }
            }
        }
        None => diags.warning(
            "Slurm cluster imported without its NCCL tests",
            format!("What it runs on, as imported, does not plan ({}): the first plan derives them from the configuration.", said(&d)),
        ),
    }
    Value::Map(map)
}

const THIRTY_MINUTES: Duration = Duration::from_secs(30 * 60);

/// A Slurm cluster's lifecycle: its schema, parser, derivation and tag keys over the cloud's Slurm backend.
pub(crate) static LIFECYCLE: Kind<SlurmSpec> = Kind {
    kind: KIND,
    schema,
    parse: spec::parse_slurm,
    parse_state: |v| spec::parse_slurm(v, &mut Diagnostics::new()),
    with_prior: |spec, _| spec,
    derive: |ctx, config, _, diags| derive(ctx, config, diags),
    ours: |v| {
        let name = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        vec![("hpc:slurm", name(v.get("name"))), ("hpc:fabric", name(v.get("fabric").get("name")))]
    },
    backend: backend::slurm,
    timeouts: Timeouts { create: THIRTY_MINUTES, update: THIRTY_MINUTES, delete: THIRTY_MINUTES },
    kept: "The pieces created so far are kept in state; apply again to finish, or destroy.",
    left: "What is left stays in state; run destroy again.",
    parts: &NoParts,
};
