//! `resource "hpc_gpu_cluster"`: N GPU nodes on a fabric, with the node environment they need.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;

use super::capacity;
use super::common::{self, fabric_ref_type};
use super::day2;
use super::gpu_fabric;
use super::lifecycle::{At, Kind, Parts, Timeouts};
use crate::catalog::Cloud;
use crate::clouds::backend::{self, Backend, Step};
use crate::clouds::shared;
use crate::framework::{
    ApplyRequest, ApplyResponse, Attribute, Block, Context, Diagnostics, NestedBlock, PlanRequest, PlanResponse, ReadOutcome, Resource,
    Schema, Type, Value,
};
use crate::ownership::Census;
use crate::planner::{self, ClusterSpec, expansion_type, expansion_value, spec};

pub struct GpuCluster;

pub fn schema() -> Schema {
    let timeouts = Block::new("How long create, update and delete may take (e.g. `90m`, `2h`); GPU capacity can take long to arrive.")
        .attribute(Attribute::optional("create", Type::String, "Default 60m."))
        .attribute(Attribute::optional("update", Type::String, "Default 60m."))
        .attribute(Attribute::optional("delete", Type::String, "Default 30m."));
    let update_strategy = Block::new(
        "How a change to the node configuration (`image`, `user_data`, `user_data_wo_version`, `ssh_public_key`, `rdma_interfaces`) \
         reaches the nodes: they are remade under their own names in batches, the others serving meanwhile.",
    )
    .attribute(Attribute::optional(
        "batch_size",
        Type::String,
        "Nodes remade at a time: a count (`2`) or a share of the nodes (`\"25%\"`, rounded up). Default `25%`.",
    ))
    .attribute(Attribute::optional(
        "wait_for_selfcheck",
        Type::Bool,
        "Wait for each batch's nodes to publish a passing boot-time self-check (`data \"hpc_gpu_selfcheck\"`) before the next batch; a \
         failing one stops the update. Default false (the next batch starts once the nodes run).",
    ));
    Schema::new(
        1,
        Block::new(
            "GPU nodes on a fabric: the node type's RDMA interfaces, placement and capacity, expanded into the cloud's own pieces in the plan. \
             Inference and media nodes need no RDMA fabric: without `fabric`, the cluster says where it runs itself and makes (or joins) \
             its own network, with no placement group.",
        )
        .attribute(Attribute::required("name", Type::String, "Name; nodes are named `<name>-0` .. `<name>-<n-1>`.").requires_replace())
        .attribute(Attribute::optional_computed(
            "fabric",
            fabric_ref_type(),
            "The fabric to build on: `fabric = hpc_gpu_fabric.<name>`. Leave it out for inference, media or single-node clusters and set \
             `cloud`, `region`, `zone` and `gpu` (or `instance_type`) instead; it then shows the network the cluster made for itself \
             (named after the cluster, placement `none`), which a filesystem can take as its `fabric`.",
        ).requires_replace())
        .attribute(Attribute::optional("cloud", Type::String, "Without a fabric: `aws`, `azure`, `gcp` or `oci`.").requires_replace())
        .attribute(Attribute::optional("region", Type::String, "Without a fabric: region (Azure: location).").requires_replace())
        .attribute(Attribute::optional("zone", Type::String, "Without a fabric: availability zone (GCP zone, OCI availability domain); required except on Azure.").requires_replace())
        .attribute(Attribute::optional("gpu", Type::String, "Without a fabric: GPU model, resolved through the catalog to a node type (or set `instance_type`)."))
        .attribute(Attribute::optional("vpc_id", Type::String, "Without a fabric: existing VPC/VNet/VCN to join (with `subnet_id`); otherwise the cluster creates a small one (10.0.0.0/16).").requires_replace())
        .attribute(Attribute::optional("subnet_id", Type::String, "Without a fabric: existing subnet to join (with `vpc_id`).").requires_replace())
        .attribute(Attribute::optional("resource_group", Type::String, "Without a fabric, Azure: existing resource group to build in; otherwise `<name>-rg` is created.").requires_replace())
        .attribute(Attribute::optional("compartment_id", Type::String, "Without a fabric, OCI: compartment OCID to build in. Required on OCI.").requires_replace())
        .attribute(Attribute::computed(
            "network",
            Type::object([("vpc_id", Type::String), ("subnet_id", Type::String)]),
            "Without a fabric: the VPC/VNet/VCN and subnet the nodes are on, created or joined (for load balancers and firewall rules). Null on a fabric: read them from it.",
        ).assigned_at_apply())
        .attribute(Attribute::required("node_count", Type::Number, "Number of nodes. Changes in place."))
            .attribute(Attribute::optional_computed(
                "capacity_type",
                Type::String,
                "`on-demand` (default), `spot`, `reservation`, `capacity-block` (AWS) or `flex-start` (GCP).",
            ).requires_replace())
            .attribute(Attribute::optional("reservation_id", Type::String, "Reservation to launch into, for `reservation` and `capacity-block`.").requires_replace())
            .attribute(Attribute::optional_computed(
                "capacity_policy",
                Type::String,
                "What an apply does when the cloud gives fewer nodes than it adds: `all-or-nothing` (the default for `pretraining` and \
                 `finetuning`: what it launched is released before it fails, so no idle GPUs are paid for), `at-least` (the default for \
                 `inference` and `media`, with `min_nodes` 1: what came is kept if at least `min_nodes` nodes run, with a warning, and the \
                 next plan adds the rest), or `keep-partial` (what came is kept and the apply fails; the next apply retries). The plan \
                 shows which applies.",
            ))
            .attribute(Attribute::optional_computed(
                "min_nodes",
                Type::Number,
                "With `capacity_policy = \"at-least\"`: the fewest nodes worth keeping (default 1). Null under the other policies.",
            ))
            .attribute(Attribute::optional("image", Type::String, "Image (AMI, image URN, image self link, image OCID); the cloud's GPU image by default."))
            .attribute(Attribute::optional("user_data", Type::String, "Cloud-init or script passed to every node unchanged. Kept in state (marked sensitive); to keep it out of state and plan files, set `user_data_wo` instead.").sensitive())
            .attribute(
                Attribute::optional(
                    "user_data_wo",
                    Type::String,
                    "Write-only `user_data`: passed to every node when they are created and never stored in state or plan files, so it \
                     can hold a secret (or an ephemeral value). Needs OpenTofu 1.11 or Terraform 1.11 or later, and `user_data_wo_version`. \
                     Changes to it are applied only when `user_data_wo_version` changes (which replaces the nodes, as a change to \
                     `user_data` does); a refresh cannot see it.",
                )
                .sensitive()
                .write_only(),
            )
            .attribute(Attribute::optional(
                "user_data_wo_version",
                Type::Number,
                "The version of `user_data_wo`: change it (e.g. increment it) to roll a new `user_data_wo` onto the nodes, which replaces them.",
            ))
            .attribute(Attribute::optional("ssh_public_key", Type::String, "SSH public key for the nodes' default user."))
            .attribute(Attribute::optional(
                "node_identity",
                Type::String,
                "The identity the nodes run as, with which their boot-time self-check (`data \"hpc_gpu_selfcheck\"`) publishes its verdict \
                 to the cloud: on AWS an IAM instance profile (name or ARN) whose role may tag only its own instance, put on the nodes; on \
                 Google Cloud a service account's email allowed to set its instances' labels, put on the nodes (scope `cloud-platform`); \
                 on OCI the OCID of the dynamic group whose policy lets the nodes' instance principals update their own instance (the \
                 provider does not make or read it). Not used on Azure, whose nodes answer the Application Health extension's probe. \
                 Required with `update_strategy.wait_for_selfcheck = true` (on AWS, Google Cloud and OCI). A change remakes the nodes \
                 (a rolling update).",
            ))
            .attribute(
                Attribute::optional(
                    "slurm",
                    super::gpu_fabric::slurm_join_type(),
                    "Join the fabric's Slurm cluster (`hpc_slurm_cluster`): `slurm = hpc_gpu_fabric.<name>.slurm_join`. Each node's first \
                     boot installs slurmd and munge where the image lacks them, writes the cluster's key and the health check program, and \
                     starts slurmd configless against the controllers, so it registers under its node name; a node remade by a repair or \
                     a rolling update joins again. A change remakes the nodes (a rolling update).",
                )
                .sensitive(),
            )
            .attribute(Attribute::optional_computed(
                "workload",
                Type::String,
                "`pretraining` (default), `finetuning`, `inference` or `media` (video transcoding: needs GPUs with NVENC encoders); drives the plan-time checks.",
            ))
            .attribute(Attribute::optional_computed(
                "rdma_interfaces",
                Type::Number,
                "RDMA interfaces per node. AWS: EFA interfaces, one per network card (default: all). Elsewhere fixed by the node type.",
            ))
            .attribute(Attribute::optional("tags", Type::map(Type::String), "Tags on every piece, after the provider's `default_tags`."))
            .attribute(Attribute::computed("id", Type::String, "Identifier of the cluster, assigned when it is created.").assigned_at_apply())
            .attribute(Attribute::computed("owner", Type::String, common::OWNER_DOC).assigned_at_apply())
            .attribute(Attribute::optional_computed("instance_type", Type::String, "Node type: from the fabric, or without one set here (or resolved from `gpu`).").requires_replace())
            .attribute(Attribute::computed("gpu_model", Type::String, "GPU model of the nodes."))
            .attribute(Attribute::computed("gpus_total", Type::Number, "GPUs in the cluster."))
            .attribute(Attribute::computed("node_names", Type::list(Type::String), "Names of the nodes."))
            .attribute(Attribute::computed(
                "nodes",
                nodes_type(),
                "The live nodes in index order: `name`, the cloud's `id` for it (instance id, instance path, VM id, instance OCID) and the `private_ip` of its primary interface, for hostfiles and job launchers. Known after apply.",
            ).assigned_at_apply())
            .attribute(Attribute::computed("expansion", expansion_type(), "The vendor pieces this cluster is made of, as planned."))
            .attribute(Attribute::computed(
                "node_environment",
                Type::map(Type::String),
                "NCCL/libfabric environment for jobs on these nodes (cloud and node type specific).",
            ))
            .attribute(Attribute::computed(
                "expected_busbw_gbs",
                Type::Number,
                "Published all-reduce bus bandwidth threshold (GB/s) for this node type, where one exists.",
            ))
            .attribute(Attribute::computed("expected_busbw_source", Type::String, "Source and scope of `expected_busbw_gbs`."))
            .attribute(Attribute::computed(
                "estimated_hourly_cost_usd",
                Type::Number,
                "Estimated cost per hour in USD: nodes x the on-demand price (the provider's `prices`, else the catalog's list price). Null when not estimated (spot, reserved, capacity-block and flex-start capacity; no known price). An estimate, not a bill.",
            ))
            .attribute(Attribute::computed("cost_basis", Type::String, "How `estimated_hourly_cost_usd` was made (price, source, date), or why it was not."))
            .attribute(Attribute::computed(
                "nccl_test_slurm",
                Type::String,
                "A Slurm batch script running nccl-tests' all_reduce_perf on these nodes by name (one task per GPU) with `node_environment`, for any Slurm version. Its log is written on the job's first node, in `/var/tmp/<name>-nccl-<job id>.log`: copy it from there and check it with `data \"hpc_nccl_check\"` before a long run.",
            ))
            .attribute(Attribute::computed(
                "nccl_test_kubernetes",
                Type::String,
                "The same all-reduce as a Kubernetes indexed Job (one pod per node), with the headless Service it needs in its comments and the cloud's RDMA device limits.",
            ))
            .attribute(Attribute::computed(
                "nvlink_domains",
                Type::list(Type::object([("name", Type::String), ("nodes", Type::list(Type::String)), ("gpus", Type::Number)])),
                "Rack-scale node types (GB200/GB300 NVL72): the NVLink domains in order, each with its `name` (`<name>-nvl<k>`, the name of the \
                 cloud's per-domain piece), its `nodes` and `gpus`. Empty for node types whose NVLink stays inside the node.",
            ))
            .attribute(Attribute::computed(
                "placement_groups",
                Type::list(Type::object([("name", Type::String), ("nodes", Type::list(Type::String))])),
                "The groups of nodes the cloud places together, each with its `name` and `nodes`: the fabric's placement group (AWS), \
                 compact placement policy (Google Cloud) or compute cluster (OCI), the cluster's cluster network (OCI), or each scale set \
                 (Azure, where InfiniBand spans one scale set). `hpc_slurm_cluster` makes each a leaf switch of its tree topology. Empty \
                 when the fabric's placement is `none`.",
            ))
            .attribute(Attribute::computed(
                "slurm_topology_conf",
                Type::String,
                "Rack-scale node types: Slurm's `topology.conf` for the `topology/block` plugin, one block per NVLink domain. Null otherwise.",
            ))
            .attribute(Attribute::computed(
                "slurm_conf",
                Type::String,
                "Rack-scale node types: the `slurm.conf` lines the block topology needs (`TopologyPlugin=topology/block`, the nodes and their GPUs). Null otherwise.",
            ))
            .attribute(Attribute::computed(
                "kubernetes_node_labels",
                Type::map(Type::map(Type::String)),
                "Labels per node name for Kubernetes (kubelet `--node-labels`): `hpc-platform/cluster`, and on rack-scale node types \
                 `hpc-platform/nvlink-domain` with the node's NVLink domain.",
            ))
            .attribute(Attribute::optional_computed(
                "repair",
                Type::String,
                "What an apply does with a node the refresh found unhealthy (`unhealthy_nodes`): `replace` (default: remade under its own \
                 name, in its placement and reservation), `reboot`, or `report` (the plan shows it, nothing changes: for teams that drain \
                 through Slurm first).",
            ))
            .attribute(Attribute::optional_computed(
                "on_maintenance",
                Type::String,
                "What an apply does with a node the cloud has scheduled maintenance on (`scheduled_maintenance`): `report` (default: \
                 the plan warns of it with its window and the node is left alone; the cloud carries the maintenance out itself) or \
                 `replace` (the node is remade under its own name ahead of the window, within `max_repairs`, whatever `repair` says).",
            ))
            .attribute(Attribute::optional_computed(
                "max_repairs",
                Type::String,
                "At most this many unhealthy nodes are repaired by one apply, a count (`1`) or a share of the nodes (`\"20%\"`, rounded up; \
                 the default), so that a bad health signal cannot recycle the whole cluster; the rest wait for a later apply.",
            ))
            .attribute(Attribute::computed(
                "revision",
                Type::String,
                "Digest of the node configuration (image, user data or its write-only version, SSH key, RDMA interfaces). A change rolls \
                 the nodes (see `update_strategy`).",
            ))
            .attribute(Attribute::computed(
                "node_revisions",
                Type::map(Type::String),
                "The `revision` each node runs, by node name: after an interrupted rolling update, which nodes run which configuration.",
            ).assigned_at_apply())
            .attribute(Attribute::computed(
                "unhealthy_nodes",
                Type::map(Type::String),
                "Nodes the last refresh found unhealthy, by name, with the reason: what the cloud says (a failed status check, a scheduled \
                 retirement or stop, a node not running or failed) or what the node's \
                 self-check published (`self-check: 7 of 8 GPUs`). The plan shows the ones the apply repairs.",
            ).assigned_at_apply())
            .attribute(Attribute::computed(
                "scheduled_maintenance",
                Type::map(Type::String),
                "Maintenance the cloud has scheduled on a node and carries out itself in its window, by node name, with the window \
                 (AWS: a scheduled `instance-reboot`, `system-reboot` or `system-maintenance` event, `scheduled system-reboot from \
                 2026-12-05T00:00Z to 2026-12-05T02:00Z`; Azure: `maintenanceRedeployStatus`, `scheduled for maintenance from ... to \
                 ...`; Google Cloud: `resourceStatus.upcomingMaintenance`, `upcoming scheduled maintenance from ...`; OCI: \
                 `timeMaintenanceRebootDue`, `maintenance reboot due ...`). The plan warns of it; no `repair` acts on it (drain the node \
                 before the window), unless `on_maintenance = \"replace\"`. A scheduled retirement or stop is in `unhealthy_nodes` \
                 instead.",
            ).assigned_at_apply())
            .attribute(Attribute::computed(
                "selfcheck",
                Type::map(Type::String),
                "The boot-time self-check verdict each node published through the cloud (`ok` or `fail-...`), by node name; nodes that \
                 have not reported are absent.",
            ).assigned_at_apply())
            .block(NestedBlock::single("update_strategy", update_strategy))
            .block(NestedBlock::single("timeouts", timeouts)),
    )
}

fn nodes_type() -> Type {
    Type::list(Type::object([("name", Type::String), ("id", Type::String), ("private_ip", Type::String)]))
}

/// `nodes` is kept from the prior state while the node list stays the same; when nodes come or go (a
/// scale, a repair of drift) or the prior state never had it, it is known only after apply.
fn plan_nodes(prior: &Value, planned: &mut Value) {
    let Value::Map(map) = planned else { return };
    if prior.is_null() {
        return;
    }
    let same_nodes = map.get("node_names").is_some_and(|n| n.is_wholly_known() && n == prior.get("node_names"));
    if !same_nodes || prior.get("nodes").is_null() {
        map.insert("nodes".into(), Value::Unknown);
    }
}

/// The nccl-tests all-reduce job for the planned nodes, as a Slurm script and a Kubernetes Job.
fn nccl_jobs(plan: &planner::ClusterPlan) -> (Value, Value) {
    let sku = plan.spec.fabric.sku;
    let name = format!("{}-nccl", plan.spec.name);
    let job = planner::nccl::NcclJob {
        name: &name,
        nodes: &plan.node_names,
        cluster: &plan.spec.name,
        gpus_per_node: sku.gpu_count,
        env: &plan.node_environment,
        expected_busbw_gbs: plan.expected_busbw.map(|b| b.gbytes_per_sec),
        // The Slurm version is not known here: the nodes by name, which every sbatch takes (`--segment` is 24.05's, and
        // from 24.05 it is refused with a node list over several domains). hpc_slurm_cluster's jobs use segments.
        segment: None,
        partition: None,
        tolerate: &[],
    };
    // EKS schedules EFA devices as an extended resource; other clouds' devices come with the node.
    let mut devices = BTreeMap::new();
    if let Some(resource) = sku.fabric.kubernetes_resource()
        && plan.spec.rdma_interfaces > 0
    {
        devices.insert(resource.to_owned(), plan.spec.rdma_interfaces);
    }
    let text = |r: Result<String, String>| r.map_or(Value::Null, Value::from);
    (text(planner::nccl::slurm_script(&job)), text(planner::nccl::kubernetes_job(&job, None, &devices)))
}

/// A state written by an earlier release with the Slurm NCCL job this release renders for it: the job is a pure
/// rendering of the nodes, their NCCL environment and the published bus bandwidth, which the state holds, so an
/// upgrade brings the text along instead of planning an update of it (the job's log now lands in /var/tmp on the
/// job's first node, and says so).
fn with_current_nccl_job(state: Value) -> Value {
    let sku = match (common::cloud_of(&state), state.get("instance_type").as_str()) {
        (Some(cloud), Some(t)) => crate::catalog::find_sku(cloud, t),
        _ => None,
    };
    let (Some(sku), Some(name), false) = (sku, state.get("name").as_str(), state.get("nccl_test_slurm").is_null()) else { return state };
    let nodes: Vec<String> =
        state.get("node_names").as_list().unwrap_or_default().iter().filter_map(|n| n.as_str().map(str::to_owned)).collect();
    let env: BTreeMap<String, String> = state
        .get("node_environment")
        .as_map()
        .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect())
        .unwrap_or_default();
    let job_name = format!("{name}-nccl");
    let job = planner::nccl::NcclJob {
        name: &job_name,
        nodes: &nodes,
        cluster: name,
        gpus_per_node: sku.gpu_count,
        env: &env,
        expected_busbw_gbs: state.get("expected_busbw_gbs").as_number().map(|n| n.as_f64()),
        segment: None,
        partition: None,
        tolerate: &[],
    };
    match (planner::nccl::slurm_script(&job), state) {
        (Ok(text), Value::Map(mut m)) => {
            m.insert("nccl_test_slurm".into(), Value::from(text));
            Value::Map(m)
        }
        (_, state) => state,
    }
}

/// The identifier of a fabric (and of the cluster that owns it, which has the same name): `<cloud>/<location>/<name>`.
fn fabric_id(f: &spec::FabricSpec) -> String {
    backend::fabric(f.cloud).id(f).unwrap_or_default()
}

/// For a cluster without a fabric: the fabric it makes for itself, as the `fabric` object, and its pieces.
fn own_fabric(ctx: &Context, f: spec::FabricSpec, diags: &mut Diagnostics) -> Option<(Value, Vec<planner::Piece>)> {
    let reference = Value::object([
        ("id", Value::from(fabric_id(&f))),
        ("cloud", Value::from(f.cloud.as_str())),
        ("region", Value::from(f.region.as_str())),
        ("zone", f.zone.as_deref().map_or(Value::Null, Value::from)),
        ("name", Value::from(f.name.as_str())),
        ("instance_type", Value::from(f.sku.name)),
        ("placement", Value::from(f.placement.as_str())),
    ]);
    // The tag count was checked with the cluster's; what is left is the cloud's own refusals.
    let mut quiet = Diagnostics::new();
    let Some(plan) = planner::plan_fabric(f, &common::defaults(ctx), &mut quiet) else {
        diags.extend(quiet);
        return None;
    };
    Some((reference, plan.pieces))
}

/// The outputs that make a rack-scale NVLink domain usable (domains, Slurm block topology, node labels),
/// from the spec alone.
fn rack_outputs(s: &ClusterSpec) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let rows = planner::rack::domain_rows(s);
    out.insert(
        "nvlink_domains".into(),
        Value::list(rows.into_iter().map(|(name, nodes, gpus)| {
            Value::object([
                ("name", Value::from(name)),
                ("nodes", Value::list(nodes.into_iter().map(Value::from))),
                ("gpus", Value::int(i64::from(gpus))),
            ])
        })),
    );
    let groups = crate::clouds::expander(s.fabric.cloud).placement_groups(s);
    out.insert(
        "placement_groups".into(),
        Value::list(groups.into_iter().map(|(name, nodes)| {
            Value::object([
                ("name", Value::from(name)),
                ("nodes", Value::list(nodes.into_iter().map(|i| Value::from(crate::nodes::node_name(&s.name, i))))),
            ])
        })),
    );
    out.insert("slurm_topology_conf".into(), planner::rack::topology_conf(s).map_or(Value::Null, Value::from));
    out.insert("slurm_conf".into(), planner::rack::slurm_conf(s).map_or(Value::Null, Value::from));
    out.insert(
        "kubernetes_node_labels".into(),
        Value::Map(
            planner::rack::node_labels(s)
                .into_iter()
                .map(|(node, labels)| (node, Value::Map(labels.into_iter().map(|(k, v)| (k, Value::from(v))).collect())))
                .collect(),
        ),
    );
    out
}

/// A state from a release before the rack-scale outputs or the day-2 attributes gets them from its own
/// configuration, so the first plan after an upgrade is empty (they are derived, never set by the cloud):
/// the nodes an earlier release made run the configuration's revision, and none was found unhealthy.
fn with_derived_outputs(state: Value) -> Value {
    let rack = state.get("kubernetes_node_labels").is_null();
    let day2 = state.get("revision").is_null();
    let policy = state.get("capacity_policy").is_null();
    let maintenance = state.get("on_maintenance").is_null();
    // Placement groups came after the rack outputs: a state with those may lack them.
    let placed = state.get("placement_groups").is_null();
    if !rack && !day2 && !policy && !maintenance && !placed {
        return state;
    }
    // What the configuration was: a cluster without a fabric keeps the one it made in `fabric`, and one on
    // a fabric keeps the fabric's node type in `instance_type`; neither was configured.
    let mut config = state.clone();
    if let Value::Map(c) = &mut config {
        let computed = if state.get("cloud").is_present() { "fabric" } else { "instance_type" };
        c.insert(computed.into(), Value::Null);
        // Computed from the node type where it is not configurable; the outputs do not depend on it.
        if rack {
            c.insert("rdma_interfaces".into(), Value::Null);
        }
    }
    let Some(spec) = spec::parse_cluster(&config, &mut Diagnostics::new()) else { return state };
    // Laid out around what runs (Azure's scale sets), as the state's own expansion says.
    let spec = with_prior(spec, &state);
    let Value::Map(mut m) = state else { return state };
    if rack || placed {
        m.extend(rack_outputs(&spec));
    }
    if policy {
        m.extend(capacity::outputs(&spec));
    }
    if day2 {
        let revision = spec.revision();
        m.insert("repair".into(), Value::from(spec.day2.repair.as_str()));
        m.insert("max_repairs".into(), Value::from(spec.day2.max_repairs.label()));
        m.insert("revision".into(), Value::from(revision.as_str()));
        let names = m.get("node_names").and_then(Value::as_list).unwrap_or_default().to_vec();
        let revisions = names.iter().filter_map(Value::as_str).map(|n| (n.to_owned(), Value::from(revision.as_str()))).collect();
        m.insert("node_revisions".into(), Value::Map(revisions));
        m.insert("unhealthy_nodes".into(), Value::Map(BTreeMap::new()));
        m.insert("selfcheck".into(), Value::Map(BTreeMap::new()));
    }
    if maintenance {
        m.insert("on_maintenance".into(), Value::from(spec.day2.on_maintenance.as_str()));
    }
    Value::Map(m)
}

/// A state from a release before `scheduled_maintenance` says none was found, so the first plan after an
/// upgrade is empty; the next refresh reads it.
fn with_maintenance_map(state: Value) -> Value {
    match state {
        Value::Map(mut m)
            if m.get("scheduled_maintenance").is_none_or(Value::is_null) && m.get("revision").is_some_and(Value::is_present) =>
        {
            m.insert("scheduled_maintenance".into(), Value::Map(BTreeMap::new()));
            Value::Map(m)
        }
        other => other,
    }
}

/// The planner's computed attributes of a configuration (the lifecycle's derivation of an imported one),
/// laid out around what `running` (a prior state, or what the import observed) says runs.
fn derive(ctx: &Context, config: &Value, running: &Value, diags: &mut Diagnostics) -> Option<BTreeMap<String, Value>> {
    derive_spec(ctx, with_prior(spec::parse_cluster(config, diags)?, running), diags)
}

/// The spec with the node groups `prior` (a state) says the cluster runs in: a change is laid out around
/// them (the cloud's backend reads them from the state's expansion).
fn with_prior(mut spec: ClusterSpec, prior: &Value) -> ClusterSpec {
    spec.running_groups = backend::cluster(spec.fabric.cloud).running_groups(prior);
    spec
}

/// The planner's computed attributes of a parsed configuration.
fn derive_spec(ctx: &Context, spec: ClusterSpec, diags: &mut Diagnostics) -> Option<BTreeMap<String, Value>> {
    let own = match spec.own_fabric.clone() {
        Some(f) => Some(own_fabric(ctx, f, diags)?),
        None => None,
    };
    let mut plan = planner::plan_cluster(spec, &common::defaults(ctx), diags);
    let mut out = BTreeMap::new();
    if let Some((reference, pieces)) = own {
        out.insert("fabric".into(), reference);
        plan.pieces.splice(0..0, pieces);
    }
    let s = &plan.spec;
    out.insert("capacity_type".into(), Value::from(s.capacity.as_str()));
    out.extend(capacity::outputs(s));
    out.insert("repair".into(), Value::from(s.day2.repair.as_str()));
    out.insert("on_maintenance".into(), Value::from(s.day2.on_maintenance.as_str()));
    out.insert("max_repairs".into(), Value::from(s.day2.max_repairs.label()));
    // Nodes joining a Slurm cluster whose key the fabric's apply has yet to make: their revision is known then.
    let key_unknown = s.slurm.as_ref().is_some_and(|j| j.key.is_none());
    out.insert("revision".into(), if key_unknown { Value::Unknown } else { Value::from(s.revision()) });
    out.insert("workload".into(), Value::from(s.workload.as_str()));
    out.insert("rdma_interfaces".into(), Value::int(i64::from(s.rdma_interfaces)));
    out.insert("instance_type".into(), Value::from(s.fabric.sku.name));
    out.insert("gpu_model".into(), Value::from(s.fabric.sku.gpu_model));
    out.insert("gpus_total".into(), Value::int(i64::from(plan.gpus_total)));
    out.insert("node_names".into(), Value::list(plan.node_names.iter().map(|n| Value::from(n.as_str()))));
    out.insert("expansion".into(), expansion_value(&plan.pieces));
    out.insert(
        "node_environment".into(),
        Value::Map(plan.node_environment.iter().map(|(k, v)| (k.clone(), Value::from(v.as_str()))).collect()),
    );
    out.insert("expected_busbw_gbs".into(), plan.expected_busbw.map_or(Value::Null, |b| Value::float(b.gbytes_per_sec)));
    out.extend(rack_outputs(s));
    let (slurm, kubernetes) = nccl_jobs(&plan);
    out.insert("nccl_test_slurm".into(), slurm);
    out.insert("nccl_test_kubernetes".into(), kubernetes);
    let cost = planner::cost::cluster_cost(&plan.spec, &common::defaults(ctx).prices);
    out.insert("estimated_hourly_cost_usd".into(), cost.usd_per_hour.map_or(Value::Null, Value::float));
    out.insert("cost_basis".into(), Value::from(cost.basis));
    out.insert(
        "expected_busbw_source".into(),
        plan.expected_busbw.map_or(Value::Null, |b| Value::from(format!("{} ({})", b.source, b.scope))),
    );
    Some(out)
}

#[async_trait]
impl Resource for GpuCluster {
    fn type_name(&self) -> &'static str {
        "hpc_gpu_cluster"
    }

    fn schema(&self) -> Schema {
        schema()
    }

    fn validate(&self, config: &Value, diags: &mut Diagnostics) {
        spec::parse_cluster_config(config, diags);
    }

    fn plan(&self, ctx: &Context, req: PlanRequest<'_>, diags: &mut Diagnostics) -> PlanResponse {
        let spec = parse_proposed(&req, diags);
        plan_spec(ctx, req, spec, diags)
    }

    /// For callers that planned already (tests); the plan RPC goes through [`Resource::plan_checked`].
    async fn check_plan(&self, ctx: &Context, req: PlanRequest<'_>, planned: &Value, diags: &mut Diagnostics) {
        if let Some(spec) = parse_proposed(&req, &mut Diagnostics::new()) {
            LIFECYCLE.plan_reads(ctx, &spec, &req, planned, diags).await;
        }
    }

    /// The configuration parsed once: the pure plan, then the lifecycle's plan-time reads (quota).
    async fn plan_checked(&self, ctx: &Context, req: PlanRequest<'_>, diags: &mut Diagnostics) -> PlanResponse {
        let spec = parse_proposed(&req, diags);
        let plan = plan_spec(ctx, req, spec.clone(), diags);
        if !diags.has_errors()
            && plan.planned.is_present()
            && let Some(spec) = &spec
        {
            LIFECYCLE.plan_reads(ctx, spec, &req, &plan.planned, diags).await;
        }
        plan
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
        let state = LIFECYCLE.import(ctx, id, "aws/us-east-1/train-nodes", diags).await?;
        // The revisions the nodes run, as a refresh reads them, tell how their user data was given.
        let refreshed = match self.read(ctx, &state, &[], &mut Diagnostics::new()).await {
            ReadOutcome::Found { state: read, .. } => read,
            _ => return Some(state),
        };
        match refreshed.get("node_revisions") {
            Value::Map(revisions) if !revisions.is_empty() => {
                let Value::Map(mut m) = state else { return Some(state) };
                m.insert("node_revisions".into(), Value::Map(revisions.clone()));
                Some(with_write_only_user_data(ctx, Value::Map(m)))
            }
            _ => Some(state),
        }
    }

    fn upgrade(&self, version: i64, state: Value, _diags: &mut Diagnostics) -> Value {
        let state = match common::cloud_of(&state) {
            Some(cloud) => backend::cluster(cloud).upgrade(version, state),
            None => state,
        };
        with_current_nccl_job(with_maintenance_map(with_derived_outputs(common::upgrade_owner(common::CLUSTER, version, state))))
    }
}

/// The configuration of a plan that does not destroy, parsed with its diagnostics (`None` when it does not
/// parse or is not wholly known yet).
fn parse_proposed(req: &PlanRequest<'_>, diags: &mut Diagnostics) -> Option<ClusterSpec> {
    if req.proposed.is_null() { None } else { spec::parse_cluster_config(req.config, diags).map(|s| with_prior(s, req.prior)) }
}

/// The pure plan of a parsed configuration: the planner's attributes, the nodes, the day-2 work, the network.
fn plan_spec(ctx: &Context, req: PlanRequest<'_>, spec: Option<ClusterSpec>, diags: &mut Diagnostics) -> PlanResponse {
    let prior = req.prior;
    let on_fabric = req.config.get("fabric").is_present() || req.config.get("fabric").is_unknown();
    let day2_spec = spec.clone();
    let mut resp = common::plan(&schema(), req, diags, |_, diags| derive_spec(ctx, spec?, diags));
    plan_nodes(prior, &mut resp.planned);
    if resp.planned.is_present() {
        match &day2_spec {
            Some(s) => day2::plan(s, prior, &mut resp.planned, diags),
            None => {
                if let Value::Map(m) = &mut resp.planned {
                    for attr in day2::ATTRS {
                        m.insert(attr.into(), Value::Unknown);
                    }
                }
            }
        }
    }
    if let Value::Map(m) = &mut resp.planned {
        if on_fabric {
            m.insert("network".into(), Value::Null);
        } else if has_missing_pieces(prior) {
            // A repair may make the network again, with new ids.
            m.insert("network".into(), Value::Unknown);
        }
    }
    resp
}

/// The most versions of write-only user data an import tries when it recognises the nodes' revision.
const WRITE_ONLY_VERSIONS_TRIED: i64 = 10_000;

/// An import reads the nodes' user data back from the cloud; if they were made from `user_data_wo`, it must
/// not reach the state. The nodes' revision tells: made from `user_data`, it is the revision of the user data
/// read back; made from `user_data_wo`, the revision of its version, which is found by trying the versions
/// (1 to [`WRITE_ONLY_VERSIONS_TRIED`]). Then the state keeps the version and no user data, as the
/// configuration that made them does, and the next plan is empty.
fn with_write_only_user_data(ctx: &Context, state: Value) -> Value {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for r in state.get("node_revisions").as_map().into_iter().flat_map(|m| m.values()).filter_map(Value::as_str) {
        *counts.entry(r.to_owned()).or_default() += 1;
    }
    let Some(nodes) = counts.into_iter().max_by_key(|(_, n)| *n).map(|(r, _)| r) else { return state };
    if state.get("user_data").is_null() || state.get("revision").as_str() == Some(nodes.as_str()) {
        return state;
    }
    // The state as a configuration: what the provider computed (the fabric's node type, or the network a
    // cluster without a fabric made; the RDMA count where it is not configurable) left out.
    let mut config = state.clone();
    if let Value::Map(c) = &mut config {
        let computed = if state.get("cloud").is_present() { "fabric" } else { "instance_type" };
        c.insert(computed.into(), Value::Null);
    }
    let parsed = spec::parse_cluster(&config, &mut Diagnostics::new()).or_else(|| {
        if let Value::Map(c) = &mut config {
            c.insert("rdma_interfaces".into(), Value::Null);
        }
        spec::parse_cluster(&config, &mut Diagnostics::new())
    });
    let Some(mut spec) = parsed else { return state };
    // Write-only user data: its text never counts (the plan shows only that there is some).
    spec.user_data = Some(crate::redact::Secret::new(String::new()));
    spec.user_data_write_only = true;
    let Some(version) = (1..=WRITE_ONLY_VERSIONS_TRIED).find(|v| {
        spec.user_data_version = Some(*v);
        spec.revision() == nodes
    }) else {
        return state;
    };
    // The expansion shows write-only user data as such.
    let expansion = derive_spec(ctx, with_prior(spec, &state), &mut Diagnostics::new()).and_then(|mut d| d.remove("expansion"));
    let Value::Map(mut m) = state else { return state };
    m.insert("user_data".into(), Value::Null);
    m.insert("user_data_wo_version".into(), Value::int(version));
    m.insert("revision".into(), Value::from(nodes));
    if let Some(expansion) = expansion {
        m.insert("expansion".into(), expansion);
    }
    Value::Map(m)
}

/// The nodes of a cluster given `user_data_wo` carry it, and the cloud hands it back on a read: it must
/// not reach the state through `user_data`. (A refresh cannot see a change to it; its version says when.)
fn keep_write_only_out(prior: &Value, mut refreshed: Value) -> Value {
    if prior.get("user_data_wo_version").is_present()
        && prior.get("user_data").is_null()
        && let Value::Map(m) = &mut refreshed
    {
        m.insert("user_data".into(), Value::Null);
    }
    refreshed
}

/// An imported cluster with the network it made for itself, when it has no fabric of its own declaring:
/// a fabric named after the cluster with no placement is the one such a cluster makes.
async fn with_own_network(ctx: &Context, state: Value, cloud: Cloud, census: &Census, diags: &mut Diagnostics) -> Option<Value> {
    let fabric = state.get("fabric").clone();
    if fabric.get("name") != state.get("name") || fabric.get("placement").as_str() != Some("none") {
        return Some(state);
    }
    let Value::Map(mut map) = state else { return None };
    if map.get("cloud").is_some_and(Value::is_present) {
        // The cloud's import already read it as a cluster that joined a network (Google Cloud: such a
        // cluster has no fabric pieces to import).
        let joined = Value::object([("vpc_id", map["vpc_id"].clone()), ("subnet_id", map["subnet_id"].clone())]);
        map.insert("network".into(), joined);
        return Some(Value::Map(map));
    }
    let own = gpu_fabric::LIFECYCLE.import_in(ctx, fabric.get("id").as_str().unwrap_or_default(), cloud, census, diags).await?;
    for attr in spec::OWN_NETWORK {
        map.insert(attr.into(), own.get(attr).clone());
    }
    if own.get("cidr_block").is_present() {
        map.insert("vpc_id".into(), Value::Null);
        map.insert("subnet_id".into(), Value::Null);
    }
    map.insert("network".into(), network_of(&own));
    // Planned again as a cluster without a fabric: the network's pieces lead its expansion.
    let mut config = map.clone();
    config.insert("fabric".into(), Value::Null);
    if config.get("rdma_interfaces").and_then(|n| n.as_number()).is_some_and(|n| n.as_f64() == 0.0) {
        config.insert("rdma_interfaces".into(), Value::Null);
    }
    let laid_out = Value::Map(map.clone());
    map.extend(derive(ctx, &Value::Map(config), &laid_out, diags)?);
    Some(Value::Map(map))
}

// ------------------------------------------------------------------------------- without a fabric

/// Whether a cluster (planned or in state) has no fabric of its own declaring and so owns its network.
fn owns_network(v: &Value) -> bool {
    v.get("cloud").is_present()
}

/// Whether a refresh found pieces of this state deleted outside.
fn has_missing_pieces(state: &Value) -> bool {
    state.get("expansion").as_list().unwrap_or_default().iter().any(|p| p.get("settings").get("missing").is_present())
}

/// The `network` attribute from a fabric's state.
fn network_of(fabric_state: &Value) -> Value {
    if fabric_state.get("vpc_id").is_null() && fabric_state.get("subnet_id").is_null() {
        return Value::Null;
    }
    Value::object([("vpc_id", fabric_state.get("vpc_id").clone()), ("subnet_id", fabric_state.get("subnet_id").clone())])
}

/// The state the fabric a cluster made for itself would have, rebuilt from the cluster's state.
fn own_fabric_state(ctx: &Context, cluster: &Value) -> Value {
    let config = spec::own_fabric_config(cluster);
    let mut quiet = Diagnostics::new();
    let derived = gpu_fabric::derive(ctx, &config, &mut quiet);
    let mut assigned = BTreeMap::from([("id".to_owned(), cluster.get("fabric").get("id").clone())]);
    // A created network's ids are outputs; the derived cidr_block says it was created (never without it).
    if derived.is_some() {
        for attr in ["vpc_id", "subnet_id"] {
            let id = cluster.get("network").get(attr);
            if id.is_present() {
                assigned.insert(attr.to_owned(), id.clone());
            }
        }
    }
    common::imported_state(&gpu_fabric::schema(), &config, &derived.unwrap_or_default(), &assigned)
}

/// A cluster whose nodes are all gone while its network is not: no nodes, every node piece marked missing.
fn without_nodes(state: &Value, cloud: Cloud, network_pieces: usize) -> Value {
    let out = shared::with_nodes(state, cloud, backend::cluster(cloud).node_piece(), &[]);
    let pieces = out.get("expansion").as_list().unwrap_or_default();
    let (network, nodes) = pieces.split_at(network_pieces.min(pieces.len()));
    let nodes = shared::mark_missing(&Value::list(nodes.iter().cloned()), |_| false);
    with_expansion(&out, network.iter().cloned().chain(nodes.as_list().unwrap_or_default().iter().cloned()))
}

fn with_expansion(state: &Value, pieces: impl IntoIterator<Item = Value>) -> Value {
    let mut map = state.as_map().cloned().unwrap_or_default();
    map.insert("expansion".into(), Value::list(pieces));
    Value::Map(map)
}

/// The cluster's expansion with its first pieces (the network's) replaced by what the fabric's refresh found.
fn with_network_pieces(state: &Value, network: &Value) -> Value {
    let found = network.as_list().unwrap_or_default();
    let pieces = state.get("expansion").as_list().unwrap_or_default();
    with_expansion(state, found.iter().cloned().chain(pieces.iter().skip(found.len()).cloned()))
}

/// Before a cluster without a fabric makes its network: whether its nodes' names are free (another owner's
/// nodes refuse the create here, so that not even the network is made).
async fn look_for_nodes(ctx: &Context, spec: &spec::ClusterSpec, cloud: Cloud, census: &Census) -> Result<(), String> {
    let default_tags = common::defaults(ctx).default_tags;
    let step = Step { ctx, census, default_tags: &default_tags, timeout: LIFECYCLE.timeouts.create };
    backend::cluster(cloud).look_for_nodes(&step, spec).await?;
    census.look_ahead()
}

/// Before the nodes of a cluster without a fabric are created or updated, under the cluster's owner: its
/// network (a create first looks at the nodes' names, so another owner's nodes refuse it before anything is
/// made). `Ok` carries the network's ids for the state; a network that cannot be made starts no node, and
/// `Err` carries the state to end with.
async fn own_network_first(at: &At<'_>, spec: &ClusterSpec, diags: &mut Diagnostics) -> Result<Value, Value> {
    let (ctx, req, cloud, census) = (at.ctx, at.req, at.cloud, at.census);
    let fabric_prior = if req.prior.is_null() { Value::Null } else { own_fabric_state(ctx, req.prior) };
    if census.is_creating()
        && let Err(e) = look_for_nodes(ctx, spec, cloud, census).await
    {
        if !census.refused() {
            diags.error("Creating the cluster failed", format!("Cluster {}: {e}. Nothing was created.", spec.name));
        }
        return Err(Value::Null);
    }
    let config = spec::own_fabric_config(req.config);
    let mut network_diags = Diagnostics::new();
    let plan = gpu_fabric::plan(
        ctx,
        PlanRequest { prior: &fabric_prior, proposed: &config, config: &config, prior_private: &[] },
        &mut network_diags,
    );
    let made = if network_diags.has_errors() {
        None
    } else {
        let request = ApplyRequest { prior: &fabric_prior, planned: &plan.planned, config: &config, private: &[] };
        Some(gpu_fabric::LIFECYCLE.apply_config(ctx, &request, cloud, census, &mut network_diags).await)
    };
    let network = made.as_ref().map_or(Value::Null, network_of);
    let failed = network_diags.has_errors();
    diags.extend(network_diags);
    if !failed {
        return Ok(network);
    }
    if req.prior.is_present() {
        return Err(req.prior.clone());
    }
    // Nothing of the nodes was started; what the network got is kept, so a destroy removes it.
    let id = plan.planned.get("id");
    let learned = BTreeMap::from([
        ("id".to_owned(), if id.is_present() { id.clone() } else { req.planned.get("fabric").get("id").clone() }),
        ("network".to_owned(), network),
    ]);
    let mut state = common::fill(req.planned, &learned);
    if let Value::Map(m) = &mut state {
        m.insert("nodes".into(), Value::list([]));
    }
    Err(state)
}

/// After the nodes of a cluster without a fabric are deleted (`left` null): its network, under the
/// cluster's owner. A network that cannot be deleted stays in state, with no nodes, for the next destroy.
async fn own_network_last(at: &At<'_>, left: Value, diags: &mut Diagnostics) -> Value {
    let (ctx, req, cloud, census) = (at.ctx, at.req, at.cloud, at.census);
    let fabric_prior = own_fabric_state(ctx, req.prior);
    let request = ApplyRequest { prior: &fabric_prior, planned: &Value::Null, config: &Value::Null, private: &[] };
    let gone = gpu_fabric::LIFECYCLE.apply_config(ctx, &request, cloud, census, diags).await;
    if gone.is_null() {
        return left;
    }
    let pieces = fabric_prior.get("expansion").as_list().map_or(0, <[Value]>::len);
    without_nodes(req.prior, cloud, pieces)
}

/// What a cluster adds to the lifecycle's steps: the quota read of a plan, its own network (first on a
/// create or update, last on a destroy, refreshed and imported with the nodes) when it has no fabric, the
/// day-2 work of an update (repairs, rolling batches) and the settlement of a converge that got fewer nodes
/// than planned (the capacity policy).
struct ClusterParts;

#[async_trait]
impl Parts<ClusterSpec> for ClusterParts {
    async fn plan_reads(&self, ctx: &Context, spec: &ClusterSpec, req: &PlanRequest<'_>, planned: &Value, diags: &mut Diagnostics) {
        if planned.get("node_count").is_wholly_known() {
            capacity::check_quota(ctx, req.prior, spec, diags).await;
        }
    }

    async fn before(&self, _kind: &Kind<ClusterSpec>, at: &At<'_>, spec: &ClusterSpec, diags: &mut Diagnostics) -> Result<Value, Value> {
        if !owns_network(at.req.planned) {
            return Ok(Value::Null);
        }
        own_network_first(at, spec, diags).await
    }

    async fn update(&self, kind: &Kind<ClusterSpec>, at: &At<'_>, spec: &ClusterSpec, diags: &mut Diagnostics) -> Value {
        day2::apply(kind, at, spec, kind.apply_timeout(at.req), diags).await
    }

    async fn settle(
        &self,
        kind: &Kind<ClusterSpec>,
        at: &At<'_>,
        spec: &ClusterSpec,
        state: Value,
        converged: Diagnostics,
        diags: &mut Diagnostics,
    ) -> Value {
        // A create's day-2 attributes; an update's come from its day-2 work.
        let state = if at.creating() && !converged.has_errors() { day2::settle(state, at.req.planned) } else { state };
        let timeout = kind.apply_timeout(at.req);
        capacity::settle(at.ctx, spec, at.req.prior, at.req.planned, state, at.cloud, at.census, timeout, converged, diags).await
    }

    async fn after(&self, at: &At<'_>, mut state: Value, network: Value) -> Value {
        if owns_network(at.req.planned)
            && at.req.planned.get("network").is_unknown()
            && let Value::Map(m) = &mut state
        {
            m.insert("network".into(), network);
        }
        state
    }

    async fn after_delete(&self, _kind: &Kind<ClusterSpec>, at: &At<'_>, left: Value, diags: &mut Diagnostics) -> Value {
        if !owns_network(at.req.prior) || left.is_present() {
            return left;
        }
        own_network_last(at, left, diags).await
    }

    async fn read(
        &self,
        ctx: &Context,
        state: &Value,
        found: ReadOutcome,
        cloud: Cloud,
        census: &Census,
        diags: &mut Diagnostics,
    ) -> ReadOutcome {
        let found = if owns_network(state) { read_owned_network(ctx, state, found, cloud, census, diags).await } else { found };
        match found {
            ReadOutcome::Found { state: refreshed, private } => {
                ReadOutcome::Found { state: keep_write_only_out(state, refreshed), private }
            }
            gone => gone,
        }
    }

    async fn imported(&self, ctx: &Context, state: Value, cloud: Cloud, census: &Census, diags: &mut Diagnostics) -> Option<Value> {
        with_own_network(ctx, state, cloud, census, diags).await
    }
}

/// Refresh of a cluster without a fabric: its nodes as usual, and its network through the fabric's own
/// refresh, under the cluster's owner. Nodes gone with the network still there is drift to repair, not a
/// cluster gone.
async fn read_owned_network(
    ctx: &Context,
    state: &Value,
    nodes: ReadOutcome,
    cloud: Cloud,
    census: &Census,
    diags: &mut Diagnostics,
) -> ReadOutcome {
    let fabric = own_fabric_state(ctx, state);
    let network = gpu_fabric::LIFECYCLE.read_in(ctx, &fabric, &[], cloud, census, diags).await;
    let planned_network = fabric.get("expansion");
    match (nodes, network) {
        (ReadOutcome::Found { state: s, private }, ReadOutcome::Found { state: f, .. }) => {
            ReadOutcome::Found { state: with_network_pieces(&s, f.get("expansion")), private }
        }
        (ReadOutcome::Found { state: s, private }, ReadOutcome::Gone) => {
            ReadOutcome::Found { state: with_network_pieces(&s, &shared::mark_missing(planned_network, |_| false)), private }
        }
        (ReadOutcome::Gone, ReadOutcome::Found { state: f, .. }) => {
            let pieces = planned_network.as_list().map_or(0, <[Value]>::len);
            ReadOutcome::Found { state: with_network_pieces(&without_nodes(state, cloud, pieces), f.get("expansion")), private: Vec::new() }
        }
        (ReadOutcome::Gone, ReadOutcome::Gone) => ReadOutcome::Gone,
    }
}

/// A cluster's lifecycle: its schema, parser, derivation and tag keys over the cloud's cluster backend.
static LIFECYCLE: Kind<ClusterSpec> = Kind {
    kind: common::CLUSTER,
    schema,
    parse: spec::parse_cluster_config,
    parse_state: |v| spec::parse_cluster(v, &mut Diagnostics::new()),
    with_prior,
    derive,
    ours: |v| {
        let name = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        vec![("hpc:cluster", name(v.get("name"))), ("hpc:fabric", name(v.get("fabric").get("name")))]
    },
    backend: |cloud| backend::cluster(cloud) as &dyn Backend<ClusterSpec>,
    timeouts: Timeouts { create: Duration::from_secs(60 * 60), update: Duration::from_secs(60 * 60), delete: Duration::from_secs(30 * 60) },
    kept: "The nodes that exist are kept in state; apply again to finish, or destroy.",
    left: "What is left stays in state; run destroy again.",
    parts: &ClusterParts,
};

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(kind: &str, name: &str) -> Value {
        Value::object([
            ("kind", Value::from(kind)),
            ("name", Value::from(name)),
            ("count", Value::int(1)),
            ("settings", Value::object([("names", Value::from("n-0 .. n-1"))])),
        ])
    }

    fn cluster_state(pieces: Vec<Value>) -> Value {
        Value::object([
            ("name", Value::from("n")),
            ("cloud", Value::from("aws")),
            ("instance_type", Value::from("p5.48xlarge")),
            ("node_count", Value::int(2)),
            ("expansion", Value::list(pieces)),
        ])
    }

    fn missing(state: &Value) -> Vec<bool> {
        state.get("expansion").as_list().unwrap().iter().map(|p| p.get("settings").get("missing").is_present()).collect()
    }

    #[test]
    fn a_cluster_whose_nodes_are_gone_keeps_its_network_pieces_and_marks_every_node_piece_missing() {
        let state = cluster_state(vec![piece("net", "n-vpc"), piece("net", "n-subnet"), piece("nodes", "n"), piece("template", "n-lt")]);
        let out = without_nodes(&state, Cloud::parse("aws").unwrap(), 2);
        assert_eq!(missing(&out), [false, false, true, true]);
        assert_eq!(out.get("node_count"), &Value::int(0));
        assert_eq!(out.get("nodes"), &Value::list([]));
    }

    #[test]
    fn the_network_refresh_replaces_only_the_leading_pieces() {
        let state = cluster_state(vec![piece("net", "n-vpc"), piece("nodes", "n")]);
        let refreshed = shared::mark_missing(&Value::list([piece("net", "n-vpc")]), |_| false);
        let out = with_network_pieces(&state, &refreshed);
        assert_eq!(missing(&out), [true, false]);
        assert_eq!(out.get("expansion").as_list().unwrap()[1], piece("nodes", "n"));
    }

    #[test]
    fn the_network_attribute_is_null_when_the_fabric_state_has_no_ids() {
        assert_eq!(network_of(&Value::object([("vpc_id", Value::Null), ("subnet_id", Value::Null)])), Value::Null);
        let made = network_of(&Value::object([("vpc_id", Value::from("vpc-1")), ("subnet_id", Value::from("subnet-1"))]));
        assert_eq!(made.get("subnet_id"), &Value::from("subnet-1"));
    }

    #[test]
    fn a_state_from_before_scheduled_maintenance_says_none_was_found_and_one_after_keeps_its_own() {
        let before = Value::object([("revision", Value::from("r1")), ("unhealthy_nodes", Value::Map(BTreeMap::new()))]);
        assert_eq!(with_maintenance_map(before).get("scheduled_maintenance"), &Value::Map(BTreeMap::new()));
        let found = Value::Map([("n-1".to_owned(), Value::from("scheduled system-reboot from 2026-12-05T00:00Z"))].into());
        let after = Value::object([("revision", Value::from("r1")), ("scheduled_maintenance", found.clone())]);
        assert_eq!(with_maintenance_map(after).get("scheduled_maintenance"), &found);
        assert_eq!(with_maintenance_map(Value::Null), Value::Null);
    }
}
