//! `hpc_parallel_filesystem` on OCI: File Storage with Lustre in the fabric's availability domain and
//! subnet, behind the fabric's security group, with its performance tier (MB/s per TB) and capacity in GB
//! (at least 31,200 GB, in steps of 10,400 GB up to 124,800 GB and of 41,600 GB above: OCI "Managing Lustre
//! file systems" and "Increasing File System Capacity", checked at plan time), grown in place, and an
//! optional Object Storage link (`data_repository = "oci://bucket@namespace/prefix"`, which OCI writes
//! `namespace:/bucket/prefix`) whose data is imported once it is ACTIVE (a sync job, polled to the end).
//! Create, update and delete are work requests, polled to the end. Only a filesystem whose `hpc:owner`
//! freeform tag the census admits is changed or deleted.
//! The lifecycle's backend for this kind, `Backend<FilesystemSpec>` on `backend::Oci`, comes last, before the tests.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value as Json, json};

use super::api;
use super::api::{Oci, Service, encode, is_gone, tags_of};
use super::backend::{self, configured, fabric_place, fabric_region, import_id, name_of, no_fabric_id, summary};
use super::filesystem;
use crate::clouds::backend::{Backend, Change, ImportError, Imported, Outcome, Step};
use crate::clouds::error::CloudError;
use crate::clouds::shared;
use crate::framework::{Context, Value};
use crate::model::FilesystemSpec;
use crate::ownership::{Census, marker_in};

/// The filesystem named `name` in the compartment the census admits, if it exists.
pub async fn observe(ctx: &Context, oci: &Oci, compartment: &str, name: &str, census: &Census) -> Result<Option<Json>, CloudError> {
    let q = format!("compartmentId={}&displayName={}", encode(compartment), encode(name));
    let found = oci
        .list(ctx, Service::Lustre, "lustreFileSystems", &q)
        .await?
        .into_iter()
        .filter(|f| !is_gone(f))
        .find(|f| census.admit("oci_lustre_file_storage_lustre_file_system", name, marker_in(&tags_of(f)), f["timeCreated"].as_str()));
    match found {
        // The list holds summaries; the full resource has the mount address.
        Some(s) => oci.get(ctx, Service::Lustre, &format!("/lustreFileSystems/{}", s["id"].as_str().unwrap_or_default())).await,
        None => Ok(None),
    }
}

/// `oci://bucket@namespace/prefix` (the provider's form) as OCI's `objectStoragePrefix`,
/// `namespace:/bucket/prefix`; None when it names no bucket and namespace.
const LUSTRE: &str = "oci_lustre_file_storage_lustre_file_system";

pub fn object_storage_prefix(repo: &str) -> Option<String> {
    let rest = repo.strip_prefix("oci://")?;
    let (location, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let (bucket, namespace) = location.split_once('@')?;
    let name_ok = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !name_ok(bucket) || !name_ok(namespace) {
        return None;
    }
    let prefix = prefix.trim_end_matches('/');
    Some(if prefix.is_empty() { format!("{namespace}:/{bucket}") } else { format!("{namespace}:/{bucket}/{prefix}") })
}

/// OCI's `namespace:/bucket/prefix` in the provider's form, `oci://bucket@namespace/prefix`; anything else
/// as it is.
pub fn data_repository(prefix: &str) -> String {
    match prefix.split_once(":/") {
        Some((namespace, rest)) if !namespace.is_empty() && !namespace.contains('/') => {
            let (bucket, path) = rest.split_once('/').unwrap_or((rest, ""));
            if path.is_empty() { format!("oci://{bucket}@{namespace}") } else { format!("oci://{bucket}@{namespace}/{path}") }
        }
        _ => prefix.to_owned(),
    }
}

/// Capacity (GB) and tier (MB/s per TB) of a live filesystem.
pub fn size_of(fs: &Json) -> (i64, i64) {
    let tier = fs["performanceTier"].as_str().and_then(|t| t.strip_prefix("MBPS_PER_TB_")).and_then(|t| t.parse().ok()).unwrap_or(0);
    (fs["capacityInGBs"].as_i64().unwrap_or(0), tier)
}

pub fn mount_target(fs: &Json) -> String {
    match (fs["managementServiceAddress"].as_str(), fs["lnet"].as_str(), fs["fileSystemName"].as_str()) {
        (Some(addr), lnet, Some(name)) => format!("{addr}@{}:/{name}", lnet.unwrap_or("tcp")),
        _ => String::new(),
    }
}

pub fn mount_command(fs: &Json) -> String {
    format!("sudo mkdir -p /mnt/lustre && sudo mount -t lustre {} /mnt/lustre", mount_target(fs))
}

async fn links(ctx: &Context, oci: &Oci, compartment: &str, fs_id: &str) -> Result<Vec<Json>, CloudError> {
    let q = format!("compartmentId={}&lustreFileSystemId={}", encode(compartment), encode(fs_id));
    Ok(oci.list(ctx, Service::Lustre, "objectStorageLinks", &q).await?.into_iter().filter(|l| !is_gone(l)).collect())
}

/// Creates the filesystem, or grows it and brings its tags up to date; then the Object Storage link.
pub async fn converge(
    ctx: &Context,
    oci: &Oci,
    spec: &FilesystemSpec,
    compartment: &str,
    tags: &BTreeMap<String, String>,
    timeout: Duration,
    census: &Census,
) -> Result<Json, CloudError> {
    let f = &spec.fabric;
    let zone = f.zone.clone().unwrap_or_default();
    let what = format!("Lustre file system {}", spec.name);
    let found = observe(ctx, oci, compartment, &spec.name, census).await?;
    census.gate()?;
    let fs = match found {
        None => {
            let joined = super::fabric::join(ctx, oci, compartment, &f.name, &zone, false).await?;
            let body = json!({
                "compartmentId": compartment,
                "availabilityDomain": zone,
                "displayName": spec.name,
                "fileSystemName": spec.filesystem_name,
                "capacityInGBs": spec.capacity_gib,
                "performanceTier": format!("MBPS_PER_TB_{}", spec.throughput_per_tib),
                "subnetId": joined.subnet,
                "nsgIds": [joined.nsg],
                "rootSquashConfiguration": {"identitySquash": "NONE"},
                "freeformTags": tags,
            });
            let (created, work) = oci.create(ctx, Service::Lustre, "lustreFileSystems", &body, &what).await?;
            if let Some(wr) = work {
                oci.wait_work_request(ctx, Service::Lustre, &wr, &format!("creating {what}"), timeout).await?;
            }
            created
        }
        Some(fs) => {
            // Made from the file system as it is when written (`if-match`), read again if it changed.
            let grown = |fs: &Json| {
                let (capacity, _) = size_of(fs);
                let mut body = serde_json::Map::new();
                if capacity < spec.capacity_gib as i64 {
                    body.insert("capacityInGBs".into(), json!(spec.capacity_gib));
                }
                if tags_of(fs) != *tags {
                    body.insert("freeformTags".into(), json!(tags));
                }
                (!body.is_empty()).then_some(Json::Object(body))
            };
            if grown(&fs).is_some() {
                let id = fs["id"].as_str().unwrap_or_default();
                let work =
                    oci.rewrite(ctx, Service::Lustre, &format!("/lustreFileSystems/{id}"), &what, grown).await?.and_then(|(_, wr)| wr);
                if let Some(wr) = work {
                    oci.wait_work_request(ctx, Service::Lustre, &wr, &format!("updating {what}"), timeout).await?;
                }
            }
            fs
        }
    };
    let id = fs["id"].as_str().unwrap_or_default().to_owned();
    let fs = oci
        .wait_state(
            ctx,
            Service::Lustre,
            &format!("/lustreFileSystems/{id}"),
            &["ACTIVE"],
            &["FAILED", "DELETED"],
            &format!("building {what}"),
            timeout,
        )
        .await?;
    if let Some(repo) = &spec.data_repository {
        let prefix = object_storage_prefix(repo).ok_or_else(|| {
            CloudError::other(format!("data_repository {repo:?} is not an Object Storage location oci://bucket@namespace/prefix"))
        })?;
        let link = match links(ctx, oci, compartment, &id).await?.into_iter().next() {
            Some(l) => l,
            None => {
                let body = json!({
                    "compartmentId": compartment,
                    "availabilityDomain": zone,
                    "displayName": format!("{}-link", spec.name),
                    "lustreFileSystemId": id,
                    "fileSystemPath": "/",
                    "objectStoragePrefix": prefix,
                    "isOverwrite": false,
                    "freeformTags": tags,
                });
                oci.create(ctx, Service::Lustre, "objectStorageLinks", &body, &format!("the Object Storage link of {what}")).await?.0
            }
        };
        import(ctx, oci, &link, &prefix, &what, timeout).await?;
    }
    Ok(fs)
}

/// Imports the link's data into the filesystem, once: when the link is ACTIVE and has run no sync job, one
/// is started; a job already running (an earlier apply was interrupted) is waited for. A job that ends
/// FAILED or CANCELED is an error naming OCI's details.
async fn import(ctx: &Context, oci: &Oci, link: &Json, prefix: &str, what: &str, timeout: Duration) -> Result<(), CloudError> {
    let link_id = link["id"].as_str().unwrap_or_default();
    let path = format!("/objectStorageLinks/{link_id}");
    let link = oci
        .wait_state(ctx, Service::Lustre, &path, &["ACTIVE"], &["FAILED", "DELETED"], &format!("linking {prefix} to {what}"), timeout)
        .await?;
    let start = async || -> Result<String, CloudError> {
        let job = oci
            .action(
                ctx,
                Service::Lustre,
                &format!("{path}/actions/startImportFromObject"),
                None,
                &format!("importing {prefix} into {what}"),
            )
            .await?;
        job["id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| CloudError::other(format!("importing {prefix} into {what}: OCI answered no sync job")))
    };
    let job_id = match (link["currentJobId"].as_str(), link["lastJobId"].as_str()) {
        (Some(current), _) => current.to_owned(),
        // Imported before; an import that failed is tried again.
        (None, Some(last)) => match oci.get(ctx, Service::Lustre, &format!("{path}/syncJobs/{last}")).await? {
            Some(job) if matches!(job["lifecycleState"].as_str(), Some("FAILED" | "CANCELED")) => start().await?,
            _ => return Ok(()),
        },
        (None, None) => start().await?,
    };
    let doing = format!("importing {prefix} into {what}");
    crate::clouds::shared::wait_for(ctx, &doing, timeout, || async {
        let job = oci
            .get(ctx, Service::Lustre, &format!("{path}/syncJobs/{job_id}"))
            .await?
            .ok_or_else(|| CloudError::other(format!("{doing}: sync job {job_id} vanished")))?;
        match job["lifecycleState"].as_str().unwrap_or_default() {
            "SUCCEEDED" => Ok(Some(())),
            state @ ("FAILED" | "CANCELED") => Err(format!(
                "{doing}: sync job {job_id} ended {state}: {}",
                job["lifecycleDetails"].as_str().unwrap_or("OCI gave no detail")
            )
            .into()),
            _ => Ok(None),
        }
    })
    .await
}

/// Deletes the link, then the filesystem (if it is the census's), and waits for the work request.
pub async fn delete(ctx: &Context, oci: &Oci, compartment: &str, name: &str, timeout: Duration, census: &Census) -> Result<(), CloudError> {
    let Some(fs) = observe(ctx, oci, compartment, name, census).await? else { return Ok(()) };
    let id = fs["id"].as_str().unwrap_or_default();
    for link in links(ctx, oci, compartment, id).await? {
        let link_id = link["id"].as_str().unwrap_or_default();
        oci.delete(ctx, Service::Lustre, &format!("/objectStorageLinks/{link_id}"), "the Object Storage link", timeout).await?;
    }
    let what = format!("Lustre file system {name}");
    if let Some(wr) = oci.delete(ctx, Service::Lustre, &format!("/lustreFileSystems/{id}"), &what, timeout).await? {
        oci.wait_work_request(ctx, Service::Lustre, &wr, &format!("deleting {what}"), timeout).await?;
    }
    Ok(())
}

/// The configuration an import rebuilds from the filesystem, its tags, and the fabric and cluster they name.
pub async fn imported_config(
    ctx: &Context,
    oci: &Oci,
    compartment: &str,
    fs: &Json,
    defaults: &BTreeMap<String, String>,
) -> Result<Value, CloudError> {
    let (capacity, tier) = size_of(fs);
    let tags = tags_of(fs);
    let fabric = tags.get("hpc:fabric").ok_or_else(|| "the filesystem has no hpc:fabric tag naming its fabric".to_owned())?;
    let (fabric_ref, _) = super::fabric::fabric_ref(ctx, oci, compartment, fabric).await?;
    let cluster_ref = match tags.get("hpc:cluster") {
        Some(cluster) => {
            let (config, _) = super::cluster::imported_config(ctx, oci, compartment, cluster, defaults, &Census::reading()).await?;
            let per_node = fabric_ref
                .get("instance_type")
                .as_str()
                .and_then(|t| crate::catalog::find_sku(crate::catalog::Cloud::Oci, t))
                .map_or(0, |s| i64::from(s.gpu_count));
            let nodes = config.get("node_count").as_number().and_then(|n| n.as_i64()).unwrap_or(0);
            Value::object([
                ("id", Value::from(super::api::resource_id(&oci.region, compartment, cluster))),
                ("name", Value::from(cluster.as_str())),
                ("gpus_total", Value::int(nodes * per_node)),
                ("workload", Value::from(config.get("workload").as_str().unwrap_or("pretraining"))),
            ])
        }
        None => Value::Null,
    };
    let id = fs["id"].as_str().unwrap_or_default();
    let repo = links(ctx, oci, compartment, id).await?.first().and_then(|l| l["objectStoragePrefix"].as_str().map(data_repository));
    let user = crate::clouds::shared::user_tags(crate::catalog::Cloud::Oci, &tags, defaults);
    Ok(Value::object([
        ("name", Value::from(fs["displayName"].as_str().unwrap_or_default())),
        ("fabric", fabric_ref),
        ("cluster", cluster_ref),
        ("capacity_gib", Value::int(capacity)),
        ("throughput_per_tib", Value::int(tier)),
        ("filesystem_name", Value::from(fs["fileSystemName"].as_str().map(str::to_owned))),
        ("data_repository", Value::from(repo)),
        ("tags", if user.is_empty() { Value::Null } else { Value::Map(user.into_iter().map(|(k, v)| (k, Value::from(v))).collect()) }),
    ]))
}

/// A filesystem state brought to what exists: capacity, tier and mount point as found.
fn refreshed(state: &Value, fs: &serde_json::Value) -> Value {
    let (capacity, tier) = filesystem::size_of(fs);
    let mut out = state.as_map().cloned().unwrap_or_default();
    out.insert("capacity_gib".into(), Value::int(capacity));
    out.insert("throughput_per_tib".into(), Value::int(tier));
    out.insert("throughput_mbps".into(), Value::int(crate::clouds::shared::throughput_mbps(capacity, tier, 1000)));
    out.insert("mount_target".into(), Value::from(filesystem::mount_target(fs)));
    out.insert("mount_command".into(), Value::from(filesystem::mount_command(fs)));
    let expansion = shared::patch_piece(
        state.get("expansion"),
        LUSTRE,
        None,
        &[("capacity_in_gbs", capacity.to_string()), ("performance_tier", format!("MBPS_PER_TB_{tier}"))],
    );
    out.insert("expansion".into(), expansion);
    Value::Map(out)
}

/// The attributes OCI assigns a filesystem besides its id.
fn mount_of(fs: &serde_json::Value) -> [(&'static str, Value); 2] {
    [("mount_target", Value::from(filesystem::mount_target(fs))), ("mount_command", Value::from(filesystem::mount_command(fs)))]
}

#[async_trait]
impl Backend<FilesystemSpec> for backend::Oci {
    async fn configured(&self, ctx: &Context) -> Result<(), CloudError> {
        configured(ctx)
    }

    fn id(&self, _spec: &FilesystemSpec) -> Option<String> {
        // The compartment is in the fabric's id, which the spec does not carry: `apply` assigns it.
        None
    }

    fn place(&self, v: &Value) -> String {
        format!("in {}", fabric_region(v))
    }

    fn summary(&self, error: &CloudError) -> Option<&'static str> {
        summary(error)
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, FilesystemSpec>) -> Outcome {
        let name = name_of(change.planned);
        let Some((region, compartment)) = fabric_place(change.planned) else {
            return Outcome::failed(change.prior.clone(), no_fabric_id("filesystem"));
        };
        let client = match api::connect(step.ctx, &region) {
            Ok(c) => c,
            Err(e) => return Outcome::failed(change.prior.clone(), e),
        };
        let id = api::resource_id(&region, &compartment, name);
        step.census.set_import_id(&id);
        let state = shared::with_attr(change.state, "id", Value::from(id));
        match filesystem::converge(step.ctx, &client, change.spec, &compartment, change.tags, step.timeout, step.census).await {
            Ok(fs) => Outcome::done(mount_of(&fs).into_iter().fold(state, |s, (k, v)| shared::with_attr(&s, k, v))),
            Err(e) => {
                let left = match filesystem::observe(step.ctx, &client, &compartment, name, step.census).await {
                    Ok(Some(fs)) => refreshed(&state, &fs),
                    _ if change.creating() => Value::Null,
                    _ => change.prior.clone(),
                };
                Outcome::failed(left, e)
            }
        }
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, _spec: Option<&FilesystemSpec>) -> Outcome {
        let Some((region, compartment)) = fabric_place(prior) else {
            return Outcome::failed(prior.clone(), no_fabric_id("filesystem"));
        };
        let client = match api::connect(step.ctx, &region) {
            Ok(c) => c,
            Err(e) => return Outcome::failed(prior.clone(), e),
        };
        let done = filesystem::delete(step.ctx, &client, &compartment, name_of(prior), step.timeout, step.census).await;
        Outcome::of(done, Value::Null, || prior.clone())
    }

    async fn read(&self, step: &Step<'_>, state: &Value, _spec: Option<&FilesystemSpec>) -> Result<Option<Value>, CloudError> {
        let Some((region, compartment)) = fabric_place(state) else { return Ok(Some(state.clone())) };
        let client = api::connect(step.ctx, &region)?;
        Ok(filesystem::observe(step.ctx, &client, &compartment, name_of(state), step.census).await?.map(|fs| refreshed(state, &fs)))
    }

    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError> {
        let (region, compartment, name) = import_id(id, "filesystem", "scratch")?;
        let client = api::connect(step.ctx, region).map_err(ImportError::failed)?;
        let (config, fs) = match filesystem::observe(step.ctx, &client, compartment, name, step.census).await {
            Ok(Some(fs)) => filesystem::imported_config(step.ctx, &client, compartment, &fs, step.default_tags).await.map(|c| (c, fs)),
            Ok(None) => Err(format!("no Lustre file system named {name} in the compartment").into()),
            Err(e) => Err(e),
        }
        .map_err(ImportError::failed)?;
        let mut assigned = BTreeMap::from([("id".to_owned(), Value::from(id))]);
        assigned.extend(mount_of(&fs).map(|(k, v)| (k.to_owned(), v)));
        Ok(Imported::new(config, assigned))
    }
}

#[cfg(test)]
mod tests {
    use super::super::backend::tests::value;
    use super::*;

    #[test]
    fn object_storage_locations_translate_both_ways() {
        for (repo, prefix) in [
            ("oci://datasets@tenancyns/imagenet/train", "tenancyns:/datasets/imagenet/train"),
            ("oci://datasets@tenancyns", "tenancyns:/datasets"),
            ("oci://datasets@tenancyns/", "tenancyns:/datasets"),
        ] {
            assert_eq!(object_storage_prefix(repo).as_deref(), Some(prefix), "{repo}");
            assert_eq!(data_repository(prefix), repo.trim_end_matches('/'), "{prefix}");
        }
        for bad in ["oci://datasets/imagenet", "oci://@ns/x", "oci://b@/x", "s3://b@ns", "tenancyns:/datasets"] {
            assert_eq!(object_storage_prefix(bad), None, "{bad}");
        }
        assert_eq!(data_repository("something-else"), "something-else");
    }

    #[test]
    fn object_storage_names_are_checked_and_prefixes_keep_their_depth() {
        // Bucket and namespace may hold letters, digits, '-', '_' and '.'; the prefix loses only trailing slashes.
        assert_eq!(object_storage_prefix("oci://my_data.v2@ns-1/a/b/c//").as_deref(), Some("ns-1:/my_data.v2/a/b/c"));
        for bad in ["oci://da ta@ns/x", "oci://data@n:s/x", "oci://data", "oci://", "OCI://data@ns"] {
            assert_eq!(object_storage_prefix(bad), None, "{bad}");
        }
        // Only `namespace:/...` with a plain namespace is OCI's form; a path or URL stays as written.
        assert_eq!(data_repository("ns:/bucket"), "oci://bucket@ns");
        assert_eq!(data_repository("/abs:/path"), "/abs:/path");
        assert_eq!(data_repository(":/bucket"), ":/bucket");
    }
    use serde_json::json;

    /// `capacityInGBs * tier` overflowed for figures past i64 (a refresh panicked in a debug build).
    #[test]
    fn a_capacity_too_large_to_count_is_no_overflow() {
        let fs = json!({"capacityInGBs": i64::MAX, "performanceTier": "MBPS_PER_TB_500"});
        assert_eq!(refreshed(&Value::Null, &fs).get("throughput_mbps"), &Value::int(i64::MAX / 1000));
    }

    #[test]
    fn any_filesystem_answer_refreshes_without_a_panic() {
        let fs = json!({"capacityInGBs": 41600, "performanceTier": "MBPS_PER_TB_500", "managementServiceAddress": "10.0.0.9",
                        "lnet": "tcp", "fileSystemName": "scr", "lifecycleState": "ACTIVE"});
        let state = value(json!({"name": "scratch", "expansion": [{"kind": LUSTRE, "name": "scratch", "count": 1, "settings": {}}]}));
        crate::fuzz::check("refreshed", crate::fuzz::answers(vec![fs]), |fs| {
            let _ = (refreshed(&state, &fs), mount_of(&fs), is_gone(&fs));
            Ok(())
        });
    }

    #[test]
    fn a_refreshed_filesystem_shows_its_live_size_and_mount() {
        let expansion = json!([{"kind": LUSTRE, "name": "scratch", "count": 1,
                                "settings": {"capacity_in_gbs": "31200", "performance_tier": "MBPS_PER_TB_125", "file_system_name": "scr"}}]);
        let state = value(json!({"name": "scratch", "capacity_gib": 31200, "throughput_per_tib": 125, "expansion": expansion}));
        let fs = json!({"capacityInGBs": 41600, "performanceTier": "MBPS_PER_TB_500", "managementServiceAddress": "10.0.0.9",
                        "lnet": "tcp", "fileSystemName": "scr"});
        let out = refreshed(&state, &fs);
        assert_eq!((out.get("capacity_gib"), out.get("throughput_mbps")), (&Value::int(41_600), &Value::int(20_800)));
        assert_eq!(out.get("mount_target").as_str(), Some("10.0.0.9@tcp:/scr"));
        let settings = out.get("expansion").as_list().unwrap()[0].get("settings").clone();
        assert_eq!(settings.get("capacity_in_gbs").as_str(), Some("41600"));
        assert_eq!(settings.get("performance_tier").as_str(), Some("MBPS_PER_TB_500"));
        assert_eq!(settings.get("file_system_name").as_str(), Some("scr"));
    }
}
