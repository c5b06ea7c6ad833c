//! `resource "hpc_parallel_filesystem"`: managed Lustre near the fabric, sized by the cloud's rules.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;

use super::common::{self, cluster_ref_type, fabric_ref_type};
use super::lifecycle::{Kind, NoParts, Timeouts};
use crate::clouds::backend;
use crate::framework::{
    ApplyRequest, ApplyResponse, Attribute, AttributePath, Block, Change, Context, Diagnostics, NestedBlock, PlanRequest, PlanResponse,
    ReadOutcome, Resource, Schema, Type, Value,
};
use crate::planner::{self, FilesystemSpec, expansion_type, expansion_value, spec};

pub struct ParallelFilesystem;

pub fn schema() -> Schema {
    let timeouts =
        Block::new("How long create, update and delete may take (e.g. `90m`, `2h`); large Lustre filesystems take long to build.")
            .attribute(Attribute::optional("create", Type::String, "Default 2h."))
            .attribute(Attribute::optional("update", Type::String, "Default 2h."))
            .attribute(Attribute::optional("delete", Type::String, "Default 1h."));
    Schema::new(
        1,
        Block::new(
            "Managed Lustre near a fabric: FSx for Lustre PERSISTENT_2, Azure Managed Lustre, Google Cloud Managed Lustre or OCI File Storage \
             with Lustre, with sizes validated against each cloud's rules at plan time.",
        )
        .attribute(Attribute::required("name", Type::String, "Name (1-40 lowercase letters, digits, hyphens).").requires_replace())
        .attribute(Attribute::required("fabric", fabric_ref_type(), "The fabric whose network serves the filesystem: `fabric = hpc_gpu_fabric.<name>`.").requires_replace())
        .attribute(Attribute::optional("cluster", cluster_ref_type(), "The cluster it feeds (`cluster = hpc_gpu_cluster.<name>`), for the throughput check."))
        .attribute(Attribute::required("capacity_gib", Type::Number, "Capacity in GiB (OCI: GB as OCI counts them). Validated per cloud and tier.")
            .requires_replace_if("when it shrinks, and on Azure whenever it changes (Azure Managed Lustre is sized at creation); elsewhere it grows in place", capacity_replaces))
        .attribute(Attribute::required(
            "throughput_per_tib",
            Type::Number,
            "Throughput tier in MB/s per TiB: 125, 250, 500 or 1000 (Azure: 40, 125, 250 or 500).",
        )
        .requires_replace_if("except on AWS, where FSx changes the tier in place", tier_replaces))
        .attribute(Attribute::optional_computed("filesystem_name", Type::String, "Lustre filesystem name clients mount (1-8 letters or digits).")
            .requires_replace_if("unless it is left out on AWS, where FSx picks the mount name itself", name_replaces))
        .attribute(Attribute::optional("data_repository", Type::String, "Object store to link: s3://, gs://, a blob container's resource id (/subscriptions/.../storageAccounts/<account>/blobServices/default/containers/<container>; its logging container is <container>-logs in the same account), oci://."))
        .attribute(Attribute::optional("metadata_iops", Type::Number, "AWS: provisioned metadata IOPS (1500, 3000, 6000, 12000 or multiples of 12000)."))
        .attribute(Attribute::optional_computed("maintenance_window", Type::String, "Azure: weekly maintenance window, e.g. `Sunday 02:00` (UTC).").requires_replace())
        .attribute(Attribute::optional("tags", Type::map(Type::String), "Tags on every piece, after the provider's `default_tags`."))
        .attribute(Attribute::computed("id", Type::String, "Identifier of the filesystem, assigned when it is created.").assigned_at_apply())
        .attribute(Attribute::computed("owner", Type::String, common::OWNER_DOC).assigned_at_apply())
        .attribute(Attribute::computed("throughput_mbps", Type::Number, "Aggregate throughput in MB/s: capacity (TiB) x tier."))
        .attribute(Attribute::computed(
            "estimated_hourly_cost_usd",
            Type::Number,
            "Estimated cost per hour in USD: capacity x the tier's price per GB-month (the provider's `prices`, else the catalog's list price) / 730 hours. Null when no price is known. An estimate, not a bill.",
        ))
        .attribute(Attribute::computed("cost_basis", Type::String, "How `estimated_hourly_cost_usd` was made (price, source, date), or why it was not."))
        .attribute(Attribute::computed("expansion", expansion_type(), "The vendor pieces this filesystem is made of, as planned."))
        .attribute(Attribute::computed("mount_target", Type::String, "Address clients mount, assigned when the filesystem is created.").assigned_at_apply())
        .attribute(Attribute::computed("mount_command", Type::String, "A ready `mount -t lustre` command for the nodes.").assigned_at_apply())
        .block(NestedBlock::single("timeouts", timeouts)),
    )
}

fn derive(ctx: &Context, config: &Value, diags: &mut Diagnostics) -> Option<BTreeMap<String, Value>> {
    let spec = spec::parse_filesystem(config, diags)?;
    let plan = planner::plan_filesystem(spec, &common::defaults(ctx), diags);
    let s = &plan.spec;
    let mut out = BTreeMap::new();
    let service = crate::catalog::limits::lustre_service(s.fabric.cloud);
    let fs_name = service.fixed_name.unwrap_or(s.filesystem_name.as_str());
    out.insert("filesystem_name".into(), Value::from(fs_name));
    out.insert(
        "maintenance_window".into(),
        match &s.maintenance_window {
            Some((day, time)) if service.maintenance_window => Value::from(format!("{day} {time}")),
            _ => Value::Null,
        },
    );
    out.insert("throughput_mbps".into(), Value::int(plan.throughput_mbps as i64));
    out.insert("expansion".into(), expansion_value(&plan.pieces));
    let cost = planner::cost::filesystem_cost(&plan.spec, &common::defaults(ctx).prices);
    out.insert("estimated_hourly_cost_usd".into(), cost.usd_per_hour.map_or(Value::Null, Value::float));
    out.insert("cost_basis".into(), Value::from(cost.basis));
    Some(out)
}

#[async_trait]
impl Resource for ParallelFilesystem {
    fn type_name(&self) -> &'static str {
        "hpc_parallel_filesystem"
    }

    fn schema(&self) -> Schema {
        schema()
    }

    fn validate(&self, config: &Value, diags: &mut Diagnostics) {
        spec::parse_filesystem(config, diags);
    }

    fn plan(&self, ctx: &Context, req: PlanRequest<'_>, diags: &mut Diagnostics) -> PlanResponse {
        let mut resp = common::plan(&schema(), req, diags, |config, diags| derive(ctx, config, diags));
        // Capacity never shrinks: where it grows in place, lowering it replaces the filesystem (see `capacity_replaces`).
        if let (Some(before), Some(after)) = (req.prior.get("capacity_gib").as_number(), req.config.get("capacity_gib").as_number())
            && after.as_f64() < before.as_f64()
            && service(req.config).is_none_or(|s| s.grows_in_place)
        {
            diags.warning_at(
                AttributePath::attr("capacity_gib"),
                "Filesystem capacity cannot shrink",
                format!(
                    "The filesystem has {before} GiB (grown outside this configuration, or capacity_gib was lowered) and Lustre capacity \
                     only grows: reaching {after} GiB means replacing it, and its data is lost. To keep it, set capacity_gib = {before}."
                ),
            );
        }
        // A service that names the mount itself (FSx): known once it exists (and no replacement, see `name_replaces`).
        if service(req.config).is_some_and(|s| s.names_itself)
            && req.config.get("filesystem_name").is_null()
            && let Value::Map(planned) = &mut resp.planned
            && planned.contains_key("filesystem_name")
        {
            let prior = req.prior.get("filesystem_name");
            planned.insert("filesystem_name".into(), if prior.is_present() { prior.clone() } else { Value::Unknown });
        }
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
        LIFECYCLE.import(ctx, id, "aws/us-east-1/fs-0123456789abcdef0", diags).await
    }

    fn upgrade(&self, version: i64, state: Value, _diags: &mut Diagnostics) -> Value {
        common::upgrade_owner(common::FILESYSTEM, version, state)
    }
}

/// Capacity grows in place on AWS, GCP and OCI; it never shrinks, and AMLFS is sized at creation.
fn capacity_replaces(change: &Change<'_>) -> bool {
    let (Some(before), Some(after)) = (change.prior.as_number(), change.config.as_number()) else { return false };
    after.as_f64() < before.as_f64() || !service(change.resource).is_none_or(|s| s.grows_in_place)
}

/// The tier is an in-place update only where the service says so.
fn tier_replaces(change: &Change<'_>) -> bool {
    !service(change.resource).is_some_and(|s| s.tier_in_place)
}

/// A mount name the service picks itself (FSx, when the configuration leaves it out) is the service's to
/// keep; any other change of the name replaces the filesystem.
fn name_replaces(change: &Change<'_>) -> bool {
    let picked_by_service = service(change.resource).is_some_and(|s| s.names_itself) && change.config.is_null();
    !picked_by_service && !change.planned.is_unknown()
}

/// The managed Lustre service of a configuration's cloud.
fn service(config: &Value) -> Option<crate::catalog::limits::LustreService> {
    common::cloud_of(config).map(crate::catalog::limits::lustre_service)
}

/// A filesystem's lifecycle: its schema, parser, derivation and tag keys over the cloud's filesystem backend.
static LIFECYCLE: Kind<FilesystemSpec> = Kind {
    kind: common::FILESYSTEM,
    schema,
    parse: spec::parse_filesystem,
    parse_state: |v| spec::parse_filesystem(v, &mut Diagnostics::new()),
    with_prior: |spec, _| spec,
    derive: |ctx, config, _, diags| derive(ctx, config, diags),
    ours: |v| {
        let name = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let mut ours = vec![("hpc:filesystem", name(v.get("name"))), ("hpc:fabric", name(v.get("fabric").get("name")))];
        if v.get("cluster").get("name").as_str().is_some() {
            ours.push(("hpc:cluster", name(v.get("cluster").get("name"))));
        }
        ours
    },
    backend: backend::filesystem,
    timeouts: Timeouts {
        create: Duration::from_secs(2 * 60 * 60),
        update: Duration::from_secs(2 * 60 * 60),
        delete: Duration::from_secs(60 * 60),
    },
    kept: "",
    left: "It stays in state; run destroy again.",
    parts: &NoParts,
};
