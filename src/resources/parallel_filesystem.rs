//! `resource "hpc_parallel_filesystem"`: managed Lustre near the fabric, sized by the cloud's rules.

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::common::{self, PlanShape, cluster_ref_type, fabric_ref_type};
use crate::catalog::Cloud;
use crate::framework::{
    ApplyRequest, ApplyResponse, Attribute, AttributePath, Block, Context, Diagnostics, PlanRequest, PlanResponse, ReadOutcome, Resource,
    Schema, Type, Value,
};
use crate::planner::{self, expansion_type, expansion_value, spec};

pub struct ParallelFilesystem;

const SHAPE: PlanShape =
    PlanShape { assigned: &["id", "mount_target", "mount_command"], replace: &["name", "fabric", "filesystem_name", "maintenance_window"] };

pub fn schema() -> Schema {
    Schema::new(
        0,
        Block::new(
            "Managed Lustre near a fabric: FSx for Lustre PERSISTENT_2, Azure Managed Lustre, Google Cloud Managed Lustre or OCI File Storage \
             with Lustre, with sizes validated against each cloud's rules at plan time.",
        )
        .attribute(Attribute::required("name", Type::String, "Name (1-40 lowercase letters, digits, hyphens)."))
        .attribute(Attribute::required("fabric", fabric_ref_type(), "The fabric whose network serves the filesystem: `fabric = hpc_gpu_fabric.<name>`."))
        .attribute(Attribute::optional("cluster", cluster_ref_type(), "The cluster it feeds (`cluster = hpc_gpu_cluster.<name>`), for the throughput check."))
        .attribute(Attribute::required("capacity_gib", Type::Number, "Capacity in GiB (OCI: GB as OCI counts them). Validated per cloud and tier."))
        .attribute(Attribute::required(
            "throughput_per_tib",
            Type::Number,
            "Throughput tier in MB/s per TiB: 125, 250, 500 or 1000 (Azure: 40, 125, 250 or 500).",
        ))
        .attribute(Attribute::optional_computed("filesystem_name", Type::String, "Lustre filesystem name clients mount (1-8 letters or digits)."))
        .attribute(Attribute::optional("data_repository", Type::String, "Object store to link: s3://, gs://, https://<account>.blob.core.windows.net/<container>, oci://."))
        .attribute(Attribute::optional("metadata_iops", Type::Number, "AWS: provisioned metadata IOPS (1500, 3000, 6000, 12000 or multiples of 12000)."))
        .attribute(Attribute::optional_computed("maintenance_window", Type::String, "Azure: weekly maintenance window, e.g. `Sunday 02:00` (UTC)."))
        .attribute(Attribute::optional("tags", Type::map(Type::String), "Tags on every piece, after the provider's `default_tags`."))
        .attribute(Attribute::computed("id", Type::String, "Identifier of the filesystem, assigned when it is created."))
        .attribute(Attribute::computed("throughput_mbps", Type::Number, "Aggregate throughput in MB/s: capacity (TiB) x tier."))
        .attribute(Attribute::computed("expansion", expansion_type(), "The vendor pieces this filesystem is made of, as planned."))
        .attribute(Attribute::computed("mount_target", Type::String, "Address clients mount, assigned when the filesystem is created."))
        .attribute(Attribute::computed("mount_command", Type::String, "A ready `mount -t lustre` command for the nodes.")),
    )
}

fn derive(ctx: &Context, config: &Value, diags: &mut Diagnostics) -> Option<BTreeMap<String, Value>> {
    let spec = spec::parse_filesystem(config, diags)?;
    let plan = planner::plan_filesystem(spec, &common::defaults(ctx), diags);
    let s = &plan.spec;
    let mut out = BTreeMap::new();
    out.insert("filesystem_name".into(), Value::from(s.filesystem_name.as_str()));
    out.insert(
        "maintenance_window".into(),
        match (&s.maintenance_window, s.fabric.cloud) {
            (Some((day, time)), Cloud::Azure) => Value::from(format!("{day} {time}")),
            _ => Value::Null,
        },
    );
    out.insert("throughput_mbps".into(), Value::int(plan.throughput_mbps as i64));
    out.insert("expansion".into(), expansion_value(&plan.pieces));
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
        let mut resp = common::plan(&schema(), &SHAPE, req, diags, |config, diags| derive(ctx, config, diags));
        // Capacity can grow in place on AWS, GCP and OCI; it never shrinks, and AMLFS is sized at creation.
        if let (Some(before), Some(after)) = (req.prior.get("capacity_gib").as_number(), req.config.get("capacity_gib").as_number())
            && before != after
        {
            let cloud = req.config.get("fabric").get("cloud").as_str().unwrap_or_default();
            if after.as_f64() < before.as_f64() || cloud == "azure" {
                resp.requires_replace.push(AttributePath::attr("capacity_gib"));
            }
        }
        // The tier is an in-place update on FSx only.
        if req.prior.is_present()
            && req.prior.get("throughput_per_tib") != req.config.get("throughput_per_tib")
            && req.config.get("fabric").get("cloud").as_str() != Some("aws")
        {
            resp.requires_replace.push(AttributePath::attr("throughput_per_tib"));
        }
        resp
    }

    async fn apply(&self, _ctx: &Context, req: ApplyRequest<'_>, diags: &mut Diagnostics) -> ApplyResponse {
        ApplyResponse { new_state: common::apply_not_available("this filesystem", &req, diags), private: Vec::new() }
    }

    async fn read(&self, _ctx: &Context, state: &Value, private: &[u8], _diags: &mut Diagnostics) -> ReadOutcome {
        ReadOutcome::Found { state: state.clone(), private: private.to_vec() }
    }

    async fn import(&self, _ctx: &Context, id: &str, diags: &mut Diagnostics) -> Option<Value> {
        diags.error(
            "Import not available yet",
            format!("Importing filesystem {id:?} needs the cloud API clients, which are not part of this release."),
        );
        None
    }
}
