//! `resource "hpc_parallel_filesystem"`: managed Lustre near the fabric, sized by the cloud's rules.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;

use super::common::{self, PlanShape, cluster_ref_type, fabric_ref_type};
use crate::catalog::Cloud;
use crate::clouds::{aws, azure, gcp, oci};
use crate::framework::{
    ApplyRequest, ApplyResponse, Attribute, AttributePath, Block, Context, Diagnostics, NestedBlock, PlanRequest, PlanResponse,
    ReadOutcome, Resource, Schema, Type, Value,
};
use crate::ownership::Census;
use crate::planner::{self, expansion_type, expansion_value, spec};

pub struct ParallelFilesystem;

const SHAPE: PlanShape = PlanShape {
    assigned: &["id", "owner", "mount_target", "mount_command"],
    replace: &["name", "fabric", "filesystem_name", "maintenance_window"],
};

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
        .attribute(Attribute::optional("data_repository", Type::String, "Object store to link: s3://, gs://, a blob container's resource id (/subscriptions/.../storageAccounts/<account>/blobServices/default/containers/<container>; its logging container is <container>-logs in the same account), oci://."))
        .attribute(Attribute::optional("metadata_iops", Type::Number, "AWS: provisioned metadata IOPS (1500, 3000, 6000, 12000 or multiples of 12000)."))
        .attribute(Attribute::optional_computed("maintenance_window", Type::String, "Azure: weekly maintenance window, e.g. `Sunday 02:00` (UTC)."))
        .attribute(Attribute::optional("tags", Type::map(Type::String), "Tags on every piece, after the provider's `default_tags`."))
        .attribute(Attribute::computed("id", Type::String, "Identifier of the filesystem, assigned when it is created."))
        .attribute(Attribute::computed("owner", Type::String, common::OWNER_DOC))
        .attribute(Attribute::computed("throughput_mbps", Type::Number, "Aggregate throughput in MB/s: capacity (TiB) x tier."))
        .attribute(Attribute::computed(
            "estimated_hourly_cost_usd",
            Type::Number,
            "Estimated cost per hour in USD: capacity x the tier's price per GB-month (the provider's `prices`, else the catalog's list price) / 730 hours. Null when no price is known. An estimate, not a bill.",
        ))
        .attribute(Attribute::computed("cost_basis", Type::String, "How `estimated_hourly_cost_usd` was made (price, source, date), or why it was not."))
        .attribute(Attribute::computed("expansion", expansion_type(), "The vendor pieces this filesystem is made of, as planned."))
        .attribute(Attribute::computed("mount_target", Type::String, "Address clients mount, assigned when the filesystem is created."))
        .attribute(Attribute::computed("mount_command", Type::String, "A ready `mount -t lustre` command for the nodes."))
        .block(NestedBlock::single("timeouts", timeouts)),
    )
}

fn derive(ctx: &Context, config: &Value, diags: &mut Diagnostics) -> Option<BTreeMap<String, Value>> {
    let spec = spec::parse_filesystem(config, diags)?;
    let plan = planner::plan_filesystem(spec, &common::defaults(ctx), diags);
    let s = &plan.spec;
    let mut out = BTreeMap::new();
    // Azure Managed Lustre always serves the filesystem as "lustrefs".
    let fs_name = if s.fabric.cloud == Cloud::Azure { "lustrefs" } else { s.filesystem_name.as_str() };
    out.insert("filesystem_name".into(), Value::from(fs_name));
    out.insert(
        "maintenance_window".into(),
        match (&s.maintenance_window, s.fabric.cloud) {
            (Some((day, time)), Cloud::Azure) => Value::from(format!("{day} {time}")),
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
        let mut resp = common::plan(&schema(), &SHAPE, req, diags, |config, diags| derive(ctx, config, diags));
        // Capacity can grow in place on AWS, GCP and OCI; it never shrinks, and AMLFS is sized at creation.
        if let (Some(before), Some(after)) = (req.prior.get("capacity_gib").as_number(), req.config.get("capacity_gib").as_number())
            && before != after
        {
            let cloud = req.config.get("fabric").get("cloud").as_str().unwrap_or_default();
            if after.as_f64() < before.as_f64() || cloud == "azure" {
                resp.requires_replace.push(AttributePath::attr("capacity_gib"));
            }
            if after.as_f64() < before.as_f64() && cloud != "azure" {
                diags.warning_at(
                    AttributePath::attr("capacity_gib"),
                    "Filesystem capacity cannot shrink",
                    format!(
                        "The filesystem has {before} GiB (grown outside this configuration, or capacity_gib was lowered) and Lustre capacity \
                         only grows: reaching {after} GiB means replacing it, and its data is lost. To keep it, set capacity_gib = {before}."
                    ),
                );
            }
        }
        // FSx for Lustre names the mount itself: known once it exists.
        if req.config.get("fabric").get("cloud").as_str() == Some("aws")
            && req.config.get("filesystem_name").is_null()
            && let Value::Map(planned) = &mut resp.planned
            && planned.contains_key("filesystem_name")
        {
            let prior = req.prior.get("filesystem_name");
            planned.insert("filesystem_name".into(), if prior.is_present() { prior.clone() } else { Value::Unknown });
            resp.requires_replace.retain(|p| *p != AttributePath::attr("filesystem_name"));
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

    async fn apply(&self, ctx: &Context, req: ApplyRequest<'_>, diags: &mut Diagnostics) -> ApplyResponse {
        common::apply_with(common::FILESYSTEM, &req, diags, async |cloud, census, d| match cloud {
            Cloud::Aws => aws_apply(ctx, &req, census, d).await,
            Cloud::Gcp => gcp_apply(ctx, &req, census, d).await,
            Cloud::Azure => azure_apply(ctx, &req, census, d).await,
            Cloud::Oci => oci_apply(ctx, &req, census, d).await,
        })
        .await
    }

    async fn read(&self, ctx: &Context, state: &Value, private: &[u8], diags: &mut Diagnostics) -> ReadOutcome {
        common::read_with(common::FILESYSTEM, state, private, diags, async |cloud, census, d| match cloud {
            Cloud::Aws => aws_read(ctx, state, private, census, d).await,
            Cloud::Gcp => gcp_read(ctx, state, private, census, d).await,
            Cloud::Azure => azure_read(ctx, state, private, census, d).await,
            Cloud::Oci => oci_read(ctx, state, private, census, d).await,
        })
        .await
    }

    async fn import(&self, ctx: &Context, id: &str, diags: &mut Diagnostics) -> Option<Value> {
        common::import_with(common::FILESYSTEM, "aws/us-east-1/fs-0123456789abcdef0", id, diags, async |cloud, census, d| match cloud {
            Cloud::Aws => aws_import(ctx, id, census, d).await,
            Cloud::Gcp => gcp_import(ctx, id, census, d).await,
            Cloud::Azure => azure_import(ctx, id, census, d).await,
            Cloud::Oci => oci_import(ctx, id, census, d).await,
        })
        .await
    }

    fn upgrade(&self, version: i64, state: Value, _diags: &mut Diagnostics) -> Value {
        common::upgrade_owner(common::FILESYSTEM, version, state)
    }
}

fn all_tags(ctx: &Context, v: &Value, census: &Census) -> BTreeMap<String, String> {
    let name = v.get("name").as_str().unwrap_or_default();
    let fabric = v.get("fabric").get("name").as_str().unwrap_or_default();
    let mut ours = vec![("hpc:filesystem", name), ("hpc:fabric", fabric)];
    if let Some(cluster) = v.get("cluster").get("name").as_str() {
        ours.push(("hpc:cluster", cluster));
    }
    common::owned_tags(ctx, v.get("tags"), &ours, census)
}

/// A state brought to what exists: capacity, tier and mount point as found; a vanished association dropped.
fn refreshed(state: &Value, live: &aws::filesystem::FsLive) -> Value {
    let mut out = state.as_map().cloned().unwrap_or_default();
    let capacity = live.capacity();
    let tier = live.throughput_per_tib().unwrap_or_default();
    out.insert("capacity_gib".into(), Value::int(capacity));
    out.insert("throughput_per_tib".into(), Value::int(tier));
    out.insert("throughput_mbps".into(), Value::int(capacity * tier / 1024));
    out.insert("filesystem_name".into(), Value::from(live.mount_name()));
    out.insert("mount_target".into(), Value::from(live.dns()));
    out.insert("mount_command".into(), Value::from(live.mount_command()));
    if state.get("metadata_iops").is_present() {
        out.insert("metadata_iops".into(), Value::from(live.metadata_iops()));
    }
    let mut expansion = common::patch_piece(
        state.get("expansion"),
        "aws_fsx_lustre_file_system",
        None,
        &[("storage_capacity", capacity.to_string()), ("per_unit_storage_throughput", tier.to_string())],
    );
    if live.dra.is_none() {
        expansion = common::mark_missing(&expansion, |k| k != "aws_fsx_data_repository_association");
    } else if let Some(path) = live.dra.as_ref().and_then(|d| d.data_repository_path()) {
        out.insert("data_repository".into(), Value::from(path));
        expansion =
            common::patch_piece(&expansion, "aws_fsx_data_repository_association", None, &[("data_repository_path", path.to_owned())]);
    }
    out.insert("expansion".into(), expansion);
    Value::Map(out)
}

fn fs_id_of(state: &Value) -> Option<String> {
    aws::api::parse_id(state.get("id").as_str()?).map(|(_, id)| id.to_owned())
}

async fn aws_apply(ctx: &Context, req: &ApplyRequest<'_>, census: &Census, diags: &mut Diagnostics) -> Value {
    let target = if req.planned.is_null() { req.prior } else { req.planned };
    let region = target.get("fabric").get("region").as_str().unwrap_or_default().to_owned();
    let client = aws::api::connect(ctx, &region).await;
    let name = target.get("name").as_str().unwrap_or_default().to_owned();
    if req.planned.is_null() {
        let Some(fs_id) = fs_id_of(req.prior) else { return Value::Null };
        let timeout = crate::clouds::shared::timeout(req.prior, "delete", Duration::from_secs(60 * 60));
        return match aws::filesystem::delete(ctx, &client, &fs_id, timeout, census).await {
            Ok(()) => Value::Null,
            Err(e) => {
                diags.error(
                    "Deleting the filesystem failed",
                    format!("Filesystem {name} ({fs_id}) in {region}: {e}. It stays in state; run destroy again."),
                );
                req.prior.clone()
            }
        };
    }
    let Some(spec) = spec::parse_filesystem(req.config, diags) else { return req.prior.clone() };
    let creating = req.prior.is_null();
    let tags = all_tags(ctx, req.config, census);
    let stale = if creating { Vec::new() } else { common::stale_tags(&all_tags(ctx, req.prior, census), &tags) };
    let options = aws::filesystem::Options {
        tags: &tags,
        stale_tags: &stale,
        timeout: crate::clouds::shared::timeout(req.config, if creating { "create" } else { "update" }, Duration::from_secs(2 * 60 * 60)),
    };
    let known = fs_id_of(req.prior);
    match aws::filesystem::converge(ctx, &client, &spec, known.as_deref(), &options, census).await {
        Ok(live) => {
            let learned = BTreeMap::from([
                ("id".to_owned(), Value::from(aws::api::resource_id(&region, live.id()))),
                ("filesystem_name".to_owned(), Value::from(live.mount_name())),
                ("mount_target".to_owned(), Value::from(live.dns())),
                ("mount_command".to_owned(), Value::from(live.mount_command())),
            ]);
            common::fill(req.planned, &learned)
        }
        Err((id, e)) => {
            diags.error(
                if creating { "Creating the filesystem failed" } else { "Updating the filesystem failed" },
                format!("Filesystem {name} in {region}: {e}."),
            );
            match id {
                // Keep track of what exists: a failed create is tainted and replaced by the next apply.
                Some(fs_id) => {
                    let learned = BTreeMap::from([("id".to_owned(), Value::from(aws::api::resource_id(&region, &fs_id)))]);
                    let state = common::fill(req.planned, &learned);
                    match aws::filesystem::observe(&client, &fs_id, census).await {
                        Ok(Some(live)) => refreshed(&state, &live),
                        _ => state,
                    }
                }
                None if creating => Value::Null,
                None => req.prior.clone(),
            }
        }
    }
}

async fn aws_read(ctx: &Context, state: &Value, private: &[u8], census: &Census, diags: &mut Diagnostics) -> ReadOutcome {
    let region = state.get("fabric").get("region").as_str().unwrap_or_default();
    let Some(fs_id) = fs_id_of(state) else { return ReadOutcome::Gone };
    let client = aws::api::connect(ctx, region).await;
    match aws::filesystem::observe(&client, &fs_id, census).await {
        Ok(None) => ReadOutcome::Gone,
        Ok(Some(live)) => ReadOutcome::Found { state: refreshed(state, &live), private: private.to_vec() },
        Err(e) => {
            diags.error("Reading the filesystem failed", format!("{fs_id} in {region}: {e}."));
            ReadOutcome::Found { state: state.clone(), private: private.to_vec() }
        }
    }
}

async fn aws_import(ctx: &Context, id: &str, census: &Census, diags: &mut Diagnostics) -> Option<Value> {
    let Some((region, key)) = aws::api::parse_id(id) else {
        diags.error("Invalid import id", format!("{id:?} is not an AWS filesystem id: give \"aws/<region>/<file system id or name>\", e.g. \"aws/us-east-1/fs-0123456789abcdef0\"."));
        return None;
    };
    let client = aws::api::connect(ctx, region).await;
    let fs_id = if key.starts_with("fs-") { Ok(Some(key.to_owned())) } else { aws::filesystem::find_by_name(&client, key, census).await };
    let live = match fs_id {
        Ok(Some(fs_id)) => aws::filesystem::observe(&client, &fs_id, census).await,
        Ok(None) => Ok(None),
        Err(e) => Err(e),
    };
    let live = match live {
        Ok(Some(live)) => live,
        Ok(None) => {
            diags.error("Cannot import the filesystem", format!("{id}: no such FSx for Lustre file system in {region}."));
            return None;
        }
        Err(e) => {
            diags.error("Cannot import the filesystem", format!("{id}: {e}."));
            return None;
        }
    };
    let config = match aws::filesystem::imported_config(&client, &live, &common::defaults(ctx).default_tags).await {
        Ok(c) => c,
        Err(e) => {
            diags.error("Cannot import the filesystem", format!("{id}: {e}."));
            return None;
        }
    };
    let derived = derive(ctx, &config, diags)?;
    let assigned = BTreeMap::from([
        ("id".to_owned(), Value::from(aws::api::resource_id(region, live.id()))),
        ("filesystem_name".to_owned(), Value::from(live.mount_name())),
        ("mount_target".to_owned(), Value::from(live.dns())),
        ("mount_command".to_owned(), Value::from(live.mount_command())),
    ]);
    Some(common::imported_state(&schema(), &config, &derived, &assigned))
}

fn gcp_labels(ctx: &Context, v: &Value, census: &Census) -> BTreeMap<String, String> {
    gcp::api::labels(&all_tags(ctx, v, census))
}

/// A GCP state brought to what exists.
fn gcp_refreshed(state: &Value, live: &gcp::filesystem::FsLive) -> Value {
    let mut out = state.as_map().cloned().unwrap_or_default();
    let (capacity, tier) = (live.instance.capacity_gib, live.instance.per_unit_storage_throughput);
    out.insert("capacity_gib".into(), Value::int(capacity));
    out.insert("throughput_per_tib".into(), Value::int(tier));
    out.insert("throughput_mbps".into(), Value::int(capacity * tier / 1024));
    out.insert("mount_target".into(), Value::from(live.mount_point()));
    out.insert("mount_command".into(), Value::from(live.mount_command()));
    let mut expansion = common::patch_piece(
        state.get("expansion"),
        "google_lustre_instance",
        None,
        &[("capacity_gib", capacity.to_string()), ("per_unit_storage_throughput", tier.to_string())],
    );
    expansion = common::mark_missing(&expansion, |k| match k {
        "google_compute_global_address" => live.address,
        "google_service_networking_connection" => live.peered,
        _ => true,
    });
    out.insert("expansion".into(), expansion);
    Value::Map(out)
}

async fn gcp_apply(ctx: &Context, req: &ApplyRequest<'_>, census: &Census, diags: &mut Diagnostics) -> Value {
    let target = if req.planned.is_null() { req.prior } else { req.planned };
    let zone = target.get("fabric").get("zone").as_str().unwrap_or_default().to_owned();
    let name = target.get("name").as_str().unwrap_or_default().to_owned();
    let Some(client) = gcp::api::connect_or_report(ctx, diags).await else { return req.prior.clone() };
    if req.planned.is_null() {
        let timeout = crate::clouds::shared::timeout(req.prior, "delete", Duration::from_secs(60 * 60));
        let fabric = req.prior.get("fabric").get("name").as_str().unwrap_or_default();
        let region = zone.rsplit_once('-').map_or(zone.as_str(), |(r, _)| r);
        let network = gcp::filesystem::host_network(ctx, &client, fabric, region).await.ok();
        return match gcp::filesystem::delete(ctx, &client, &zone, &name, network.as_deref(), timeout, census).await {
            Ok(()) => Value::Null,
            Err(e) => {
                diags.error(
                    "Deleting the filesystem failed",
                    format!("Filesystem {name} in {zone}: {e}. It stays in state; run destroy again."),
                );
                req.prior.clone()
            }
        };
    }
    let Some(spec) = spec::parse_filesystem(req.config, diags) else { return req.prior.clone() };
    let creating = req.prior.is_null();
    let labels = gcp_labels(ctx, req.config, census);
    let options = gcp::filesystem::Options {
        labels: &labels,
        timeout: crate::clouds::shared::timeout(req.config, if creating { "create" } else { "update" }, Duration::from_secs(2 * 60 * 60)),
    };
    census.set_import_id(gcp::api::resource_id(&zone, &name));
    let learned = BTreeMap::from([("id".to_owned(), Value::from(gcp::api::resource_id(&zone, &name)))]);
    let state = common::fill(req.planned, &learned);
    match gcp::filesystem::converge(ctx, &client, &spec, &options, census).await {
        Ok(live) => {
            let learned = BTreeMap::from([
                ("id".to_owned(), Value::from(gcp::api::resource_id(&zone, &name))),
                ("mount_target".to_owned(), Value::from(live.mount_point())),
                ("mount_command".to_owned(), Value::from(live.mount_command())),
            ]);
            common::fill(req.planned, &learned)
        }
        Err(e) => {
            diags.error(
                if creating { "Creating the filesystem failed" } else { "Updating the filesystem failed" },
                format!("Filesystem {name} in {zone}: {e}."),
            );
            match gcp::filesystem::observe(ctx, &client, &zone, &name, None, census).await {
                Ok(Some(live)) => gcp_refreshed(&state, &live),
                // The instance does not exist, but its reserved range may: keep the state (the CLI taints it)
                // so that the next apply or a destroy finds and removes what was made.
                _ if creating && gcp::filesystem::range_exists(ctx, &client, &name, census).await != Some(false) => state,
                _ if creating => Value::Null,
                _ => req.prior.clone(),
            }
        }
    }
}

async fn gcp_read(ctx: &Context, state: &Value, private: &[u8], census: &Census, diags: &mut Diagnostics) -> ReadOutcome {
    let zone = state.get("fabric").get("zone").as_str().unwrap_or_default();
    let name = state.get("name").as_str().unwrap_or_default();
    let Some(client) = gcp::api::connect_or_report(ctx, diags).await else {
        return ReadOutcome::Found { state: state.clone(), private: private.to_vec() };
    };
    match gcp::filesystem::observe(ctx, &client, zone, name, None, census).await {
        // Only the reserved range is left (a create that failed part-way): still ours to remove.
        Ok(None) if gcp::filesystem::range_exists(ctx, &client, name, census).await == Some(true) => {
            let mut out = state.as_map().cloned().unwrap_or_default();
            out.insert("expansion".into(), common::mark_missing(state.get("expansion"), |k| k != "google_lustre_instance"));
            ReadOutcome::Found { state: Value::Map(out), private: private.to_vec() }
        }
        Ok(None) => ReadOutcome::Gone,
        Ok(Some(live)) => ReadOutcome::Found { state: gcp_refreshed(state, &live), private: private.to_vec() },
        Err(e) => {
            diags.error("Reading the filesystem failed", format!("Filesystem {name} in {zone}: {e}."));
            ReadOutcome::Found { state: state.clone(), private: private.to_vec() }
        }
    }
}

async fn gcp_import(ctx: &Context, id: &str, census: &Census, diags: &mut Diagnostics) -> Option<Value> {
    let Some((zone, name)) = gcp::api::parse_id(id) else {
        diags.error(
            "Invalid import id",
            format!("{id:?} is not a Google Cloud filesystem id: give \"gcp/<zone>/<name>\", e.g. \"gcp/us-central1-a/scratch\"."),
        );
        return None;
    };
    let client = gcp::api::connect_or_report(ctx, diags).await?;
    let fail = |diags: &mut Diagnostics, e: String| {
        diags.error("Cannot import the filesystem", format!("{id}: {e}."));
        None
    };
    let live = match gcp::filesystem::observe(ctx, &client, zone, name, None, census).await {
        Ok(Some(live)) => live,
        Ok(None) => return fail(diags, format!("no Managed Lustre instance {name} in {zone}")),
        Err(e) => return fail(diags, e),
    };
    let region = zone.rsplit_once('-').map_or(zone, |(r, _)| r);
    let described = gcp::fabric::parse_description(&live.instance.description).unwrap_or_default();
    let Some(fabric_name) = described.get("fabric").cloned() else {
        return fail(diags, "the instance's description does not name its fabric (it was not made by this provider)".into());
    };
    let fabric = match gcp::fabric::observe(ctx, &client, &fabric_name, region, &Census::reading()).await {
        Ok(f) => f,
        Err(e) => return fail(diags, e),
    };
    let d = fabric.description().unwrap_or_default();
    let fabric_ref = gcp::fabric::fabric_ref(zone, region, &fabric_name, &d);
    let defaults = gcp::api::labels(&common::defaults(ctx).default_tags);
    let mut config = gcp::filesystem::imported_config(zone, &live, fabric_ref, &defaults);
    if let Some(cluster) = live.instance.labels.get("hpc_cluster") {
        let nodes = match gcp::cluster::nodes(ctx, &client, zone, cluster, &Census::reading()).await {
            Ok(n) => n,
            Err(e) => return fail(diags, e),
        };
        let per_node = d.get("instance_type").and_then(|t| crate::catalog::find_sku(Cloud::Gcp, t)).map_or(0, |s| i64::from(s.gpu_count));
        let workload =
            nodes.first().and_then(|n| gcp::cluster::metadata(&n.instance, "hpc-workload")).unwrap_or_else(|| "pretraining".into());
        if let Value::Map(m) = &mut config {
            m.insert(
                "cluster".into(),
                Value::object([
                    ("id", Value::from(gcp::api::resource_id(zone, cluster))),
                    ("name", Value::from(cluster.as_str())),
                    ("gpus_total", Value::int(nodes.len() as i64 * per_node)),
                    ("workload", Value::from(workload)),
                ]),
            );
        }
    }
    let derived = derive(ctx, &config, diags)?;
    let assigned = BTreeMap::from([
        ("id".to_owned(), Value::from(id)),
        ("mount_target".to_owned(), Value::from(live.mount_point())),
        ("mount_command".to_owned(), Value::from(live.mount_command())),
    ]);
    Some(common::imported_state(&schema(), &config, &derived, &assigned))
}

/// An Azure state brought to what exists.
fn azure_refreshed(state: &Value, fs: &serde_json::Value) -> Value {
    let (capacity, tier) = azure::filesystem::size_of(fs);
    let mut out = state.as_map().cloned().unwrap_or_default();
    out.insert("capacity_gib".into(), Value::int(capacity));
    out.insert("throughput_per_tib".into(), Value::int(tier));
    out.insert("throughput_mbps".into(), Value::int(capacity * tier / 1024));
    out.insert("mount_target".into(), Value::from(azure::filesystem::mount_target(fs)));
    out.insert("mount_command".into(), Value::from(azure::filesystem::mount_command(fs)));
    Value::Map(out)
}

async fn azure_apply(ctx: &Context, req: &ApplyRequest<'_>, census: &Census, diags: &mut Diagnostics) -> Value {
    let target = if req.planned.is_null() { req.prior } else { req.planned };
    let name = target.get("name").as_str().unwrap_or_default().to_owned();
    let Some(arm) = azure::api::connect_or_report(ctx, diags).await else { return req.prior.clone() };
    let Some(group) = target.get("fabric").get("id").as_str().and_then(azure::cluster::group_of_fabric) else {
        diags.error("Unknown fabric", "The filesystem's fabric has no Azure id (azure/<resource group>/<name>): apply the fabric first.");
        return req.prior.clone();
    };
    if req.planned.is_null() {
        let timeout = crate::clouds::shared::timeout(req.prior, "delete", Duration::from_secs(60 * 60));
        return match azure::filesystem::delete(ctx, &arm, &group, &name, timeout, census).await {
            Ok(()) => Value::Null,
            Err(e) => {
                diags.error(
                    "Deleting the filesystem failed",
                    format!("Filesystem {name} in {group}: {e}. It stays in state; run destroy again."),
                );
                req.prior.clone()
            }
        };
    }
    let Some(spec) = spec::parse_filesystem(req.config, diags) else { return req.prior.clone() };
    let creating = req.prior.is_null();
    let timeout = crate::clouds::shared::timeout(req.config, if creating { "create" } else { "update" }, Duration::from_secs(2 * 60 * 60));
    census.set_import_id(azure::api::resource_id(&group, &name));
    match azure::filesystem::converge(ctx, &arm, &spec, &group, &all_tags(ctx, req.config, census), timeout, census).await {
        Ok(fs) => {
            let learned = BTreeMap::from([
                ("id".to_owned(), Value::from(azure::api::resource_id(&group, &name))),
                ("mount_target".to_owned(), Value::from(azure::filesystem::mount_target(&fs))),
                ("mount_command".to_owned(), Value::from(azure::filesystem::mount_command(&fs))),
            ]);
            common::fill(req.planned, &learned)
        }
        Err(e) => {
            diags.error(
                if creating { "Creating the filesystem failed" } else { "Updating the filesystem failed" },
                format!("Filesystem {name} in {group}: {e}."),
            );
            match azure::filesystem::observe(ctx, &arm, &group, &name, census).await {
                Ok(Some(fs)) => {
                    let learned = BTreeMap::from([("id".to_owned(), Value::from(azure::api::resource_id(&group, &name)))]);
                    azure_refreshed(&common::fill(req.planned, &learned), &fs)
                }
                _ if creating => Value::Null,
                _ => req.prior.clone(),
            }
        }
    }
}

async fn azure_read(ctx: &Context, state: &Value, private: &[u8], census: &Census, diags: &mut Diagnostics) -> ReadOutcome {
    let unchanged = || ReadOutcome::Found { state: state.clone(), private: private.to_vec() };
    let name = state.get("name").as_str().unwrap_or_default();
    let Some(group) = state.get("fabric").get("id").as_str().and_then(azure::cluster::group_of_fabric) else { return unchanged() };
    let Some(arm) = azure::api::connect_or_report(ctx, diags).await else { return unchanged() };
    match azure::filesystem::observe(ctx, &arm, &group, name, census).await {
        Ok(None) => ReadOutcome::Gone,
        Ok(Some(fs)) => ReadOutcome::Found { state: azure_refreshed(state, &fs), private: private.to_vec() },
        Err(e) => {
            diags.error("Reading the filesystem failed", format!("Filesystem {name} in {group}: {e}."));
            unchanged()
        }
    }
}

async fn azure_import(ctx: &Context, id: &str, census: &Census, diags: &mut Diagnostics) -> Option<Value> {
    let Some((group, name)) = azure::api::parse_id(id) else {
        diags.error(
            "Invalid import id",
            format!("{id:?} is not an Azure filesystem id: give \"azure/<resource group>/<name>\", e.g. \"azure/train-rg/scratch\"."),
        );
        return None;
    };
    let arm = azure::api::connect_or_report(ctx, diags).await?;
    let found = match azure::filesystem::observe(ctx, &arm, group, name, census).await {
        Ok(Some(fs)) => {
            azure::filesystem::imported_config(ctx, &arm, group, &fs, &common::defaults(ctx).default_tags).await.map(|c| (c, fs))
        }
        Ok(None) => Err(format!("no Azure Managed Lustre filesystem {name} in {group}")),
        Err(e) => Err(e),
    };
    let (config, fs) = match found {
        Ok(f) => f,
        Err(e) => {
            diags.error("Cannot import the filesystem", format!("{id}: {e}."));
            return None;
        }
    };
    let derived = derive(ctx, &config, diags)?;
    let assigned = BTreeMap::from([
        ("id".to_owned(), Value::from(id)),
        ("mount_target".to_owned(), Value::from(azure::filesystem::mount_target(&fs))),
        ("mount_command".to_owned(), Value::from(azure::filesystem::mount_command(&fs))),
    ]);
    Some(common::imported_state(&schema(), &config, &derived, &assigned))
}

const OCI_LUSTRE: &str = "oci_lustre_file_storage_lustre_file_system";

fn oci_refreshed(state: &Value, fs: &serde_json::Value) -> Value {
    let (capacity, tier) = oci::filesystem::size_of(fs);
    let mut out = state.as_map().cloned().unwrap_or_default();
    out.insert("capacity_gib".into(), Value::int(capacity));
    out.insert("throughput_per_tib".into(), Value::int(tier));
    out.insert("throughput_mbps".into(), Value::int(capacity * tier / 1000));
    out.insert("mount_target".into(), Value::from(oci::filesystem::mount_target(fs)));
    out.insert("mount_command".into(), Value::from(oci::filesystem::mount_command(fs)));
    let expansion = common::patch_piece(
        state.get("expansion"),
        OCI_LUSTRE,
        None,
        &[("capacity_in_gbs", capacity.to_string()), ("performance_tier", format!("MBPS_PER_TB_{tier}"))],
    );
    out.insert("expansion".into(), expansion);
    Value::Map(out)
}

/// Region and compartment of the fabric a filesystem is on (`oci/<region>/<compartment>/<name>`).
fn oci_place(state: &Value) -> Option<(String, String)> {
    oci::api::parse_id(state.get("fabric").get("id").as_str()?).map(|(r, c, _)| (r.to_owned(), c.to_owned()))
}

async fn oci_apply(ctx: &Context, req: &ApplyRequest<'_>, census: &Census, diags: &mut Diagnostics) -> Value {
    let target = if req.planned.is_null() { req.prior } else { req.planned };
    let name = target.get("name").as_str().unwrap_or_default().to_owned();
    let Some((region, compartment)) = oci_place(target) else {
        diags.error("Unknown fabric", "The filesystem's fabric has no OCI id (oci/<region>/<compartment>/<name>): apply the fabric first.");
        return req.prior.clone();
    };
    let Some(client) = oci::api::connect_or_report(ctx, &region, diags) else { return req.prior.clone() };
    if req.planned.is_null() {
        let timeout = crate::clouds::shared::timeout(req.prior, "delete", Duration::from_secs(60 * 60));
        return match oci::filesystem::delete(ctx, &client, &compartment, &name, timeout, census).await {
            Ok(()) => Value::Null,
            Err(e) => {
                oci::api::report(
                    diags,
                    "Deleting the filesystem failed",
                    format!("Filesystem {name} in {region}: {e}. It stays in state; run destroy again."),
                );
                req.prior.clone()
            }
        };
    }
    let Some(spec) = spec::parse_filesystem(req.config, diags) else { return req.prior.clone() };
    let creating = req.prior.is_null();
    let timeout = crate::clouds::shared::timeout(req.config, if creating { "create" } else { "update" }, Duration::from_secs(2 * 60 * 60));
    let id = Value::from(oci::api::resource_id(&region, &compartment, &name));
    census.set_import_id(oci::api::resource_id(&region, &compartment, &name));
    match oci::filesystem::converge(ctx, &client, &spec, &compartment, &all_tags(ctx, req.config, census), timeout, census).await {
        Ok(fs) => {
            let learned = BTreeMap::from([
                ("id".to_owned(), id),
                ("mount_target".to_owned(), Value::from(oci::filesystem::mount_target(&fs))),
                ("mount_command".to_owned(), Value::from(oci::filesystem::mount_command(&fs))),
            ]);
            common::fill(req.planned, &learned)
        }
        Err(e) => {
            let summary = if creating { "Creating the filesystem failed" } else { "Updating the filesystem failed" };
            oci::api::report(diags, summary, format!("Filesystem {name} in {region}: {e}."));
            match oci::filesystem::observe(ctx, &client, &compartment, &name, census).await {
                Ok(Some(fs)) => oci_refreshed(&common::fill(req.planned, &BTreeMap::from([("id".to_owned(), id)])), &fs),
                _ if creating => Value::Null,
                _ => req.prior.clone(),
            }
        }
    }
}

async fn oci_read(ctx: &Context, state: &Value, private: &[u8], census: &Census, diags: &mut Diagnostics) -> ReadOutcome {
    let unchanged = || ReadOutcome::Found { state: state.clone(), private: private.to_vec() };
    let name = state.get("name").as_str().unwrap_or_default();
    let Some((region, compartment)) = oci_place(state) else { return unchanged() };
    let Some(client) = oci::api::connect_or_report(ctx, &region, diags) else { return unchanged() };
    match oci::filesystem::observe(ctx, &client, &compartment, name, census).await {
        Ok(None) => ReadOutcome::Gone,
        Ok(Some(fs)) => ReadOutcome::Found { state: oci_refreshed(state, &fs), private: private.to_vec() },
        Err(e) => {
            oci::api::report(diags, "Reading the filesystem failed", format!("Filesystem {name} in {region}: {e}."));
            unchanged()
        }
    }
}

async fn oci_import(ctx: &Context, id: &str, census: &Census, diags: &mut Diagnostics) -> Option<Value> {
    let (region, compartment, name) = common::oci_import_id(id, "filesystem", "scratch", diags)?;
    let client = oci::api::connect_or_report(ctx, region, diags)?;
    let found = match oci::filesystem::observe(ctx, &client, compartment, name, census).await {
        Ok(Some(fs)) => {
            oci::filesystem::imported_config(ctx, &client, compartment, &fs, &common::defaults(ctx).default_tags).await.map(|c| (c, fs))
        }
        Ok(None) => Err(format!("no Lustre file system named {name} in the compartment")),
        Err(e) => Err(e),
    };
    let (config, fs) = match found {
        Ok(f) => f,
        Err(e) => {
            oci::api::report(diags, "Cannot import the filesystem", format!("{id}: {e}."));
            return None;
        }
    };
    let derived = derive(ctx, &config, diags)?;
    let assigned = BTreeMap::from([
        ("id".to_owned(), Value::from(id)),
        ("mount_target".to_owned(), Value::from(oci::filesystem::mount_target(&fs))),
        ("mount_command".to_owned(), Value::from(oci::filesystem::mount_command(&fs))),
    ]);
    Some(common::imported_state(&schema(), &config, &derived, &assigned))
}
