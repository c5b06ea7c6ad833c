//! `hpc_parallel_filesystem` on AWS: FSx for Lustre PERSISTENT_2 in the fabric's subnet and security
//! group, with throughput per TiB, metadata configuration and an optional S3 data repository association.
//! Capacity grows in place; FSx assigns the mount name. Only a file system whose `hpc:owner` tag the census
//! admits is adopted, changed or deleted.
//! The lifecycle's backend for this kind, `Backend<FilesystemSpec>` on `backend::Aws`, comes last, before the tests.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_fsx::types::{
    AutoExportPolicy, AutoImportPolicy, CreateFileSystemLustreConfiguration, CreateFileSystemLustreMetadataConfiguration,
    DataCompressionType, DataRepositoryAssociation, EventType, FileSystem, FileSystemLifecycle, FileSystemType, LustreDeploymentType,
    MetadataConfigurationMode, S3DataRepositoryConfiguration, StorageType, Tag, UpdateFileSystemLustreConfiguration,
    UpdateFileSystemLustreMetadataConfiguration,
};

use super::api::{self, Aws};
use super::backend::{self, fabric_region};
use super::fabric;
use super::filesystem;
use crate::clouds::backend::{Backend, Change, ImportError, Imported, Outcome, Step};
use crate::clouds::error::CloudError;
use crate::clouds::shared;
use crate::framework::{Context, Value};
use crate::model::FilesystemSpec;
use crate::ownership::{Census, marker_in};

pub const TAG: &str = "hpc:filesystem";

/// What exists of a filesystem.
#[derive(Clone, Debug)]
pub struct FsLive {
    pub fs: FileSystem,
    pub dra: Option<DataRepositoryAssociation>,
}

impl FsLive {
    pub fn id(&self) -> &str {
        self.fs.file_system_id().unwrap_or_default()
    }

    pub fn capacity(&self) -> i64 {
        i64::from(self.fs.storage_capacity().unwrap_or_default())
    }

    pub fn throughput_per_tib(&self) -> Option<i64> {
        self.fs.lustre_configuration().and_then(|l| l.per_unit_storage_throughput()).map(i64::from)
    }

    pub fn metadata_iops(&self) -> Option<i64> {
        let m = self.fs.lustre_configuration()?.metadata_configuration()?;
        (m.mode() == Some(&MetadataConfigurationMode::UserProvisioned)).then(|| m.iops().map(i64::from)).flatten()
    }

    pub fn mount_name(&self) -> &str {
        self.fs.lustre_configuration().and_then(|l| l.mount_name()).unwrap_or_default()
    }

    pub fn dns(&self) -> &str {
        self.fs.dns_name().unwrap_or_default()
    }

    /// A ready mount command (the FSx user guide's options).
    pub fn mount_command(&self) -> String {
        format!("sudo mkdir -p /fsx && sudo mount -t lustre -o relatime,flock {}@tcp:/{} /fsx", self.dns(), self.mount_name())
    }

    pub fn tags(&self) -> BTreeMap<String, String> {
        self.fs.tags().iter().filter_map(|t| Some((t.key()?.to_owned(), t.value()?.to_owned()))).collect()
    }
}

fn fsx_tags(tags: &BTreeMap<String, String>) -> Vec<Tag> {
    tags.iter().map(|(k, v)| Tag::builder().key(k).value(v).build()).collect()
}

const KIND: &str = "aws_fsx_lustre_file_system";

fn tags_of(fs: &FileSystem) -> BTreeMap<String, String> {
    fs.tags().iter().filter_map(|t| Some((t.key()?.to_owned(), t.value()?.to_owned()))).collect()
}

/// The filesystem with this id and its data repository association, or None when it is gone (or is not
/// the census's).
pub async fn observe(aws: &Aws, fs_id: &str, census: &Census) -> Result<Option<FsLive>, CloudError> {
    let out = match aws.fsx.describe_file_systems().file_system_ids(fs_id).send().await {
        Ok(out) => out,
        Err(e) if api::code(&e) == Some("FileSystemNotFound") => return Ok(None),
        Err(e) => return Err(api::error(&e).context(format!("reading file system {fs_id}"))),
    };
    let Some(fs) = out.file_systems().first().cloned() else { return Ok(None) };
    if matches!(fs.lifecycle(), Some(FileSystemLifecycle::Deleting)) {
        return Ok(None);
    }
    let name = tags_of(&fs).get(TAG).cloned().unwrap_or_default();
    if !census.admit(KIND, &format!("{name} ({fs_id})"), marker_in(&tags_of(&fs)), None) {
        return Ok(None);
    }
    let dras = aws
        .fsx
        .describe_data_repository_associations()
        .filters(aws_sdk_fsx::types::Filter::builder().name(aws_sdk_fsx::types::FilterName::FileSystemId).values(fs_id).build())
        .send()
        .await
        .map_err(|e| api::error(&e).context(format!("reading data repository associations of {fs_id}")))?;
    // One being deleted (FSx deletes asynchronously) is no longer the filesystem's link.
    let dra = dras.associations().iter().find(|d| d.lifecycle().is_none_or(|l| l.as_str() != "DELETING")).cloned();
    Ok(Some(FsLive { fs, dra }))
}

/// A file system tagged with this name that the census admits (for a create whose id never reached the
/// state): pages through DescribeFileSystems, which has no tag filter. Another owner's is recorded, with
/// the id an import of it would take.
pub async fn find_by_name(aws: &Aws, name: &str, census: &Census) -> Result<Option<String>, CloudError> {
    let mut token = None;
    let mut pages = crate::clouds::shared::Pages::new("FSx", "NextToken");
    loop {
        let out = aws
            .fsx
            .describe_file_systems()
            .set_next_token(token.take())
            .send()
            .await
            .map_err(|e| api::error(&e).context("listing file systems"))?;
        for fs in out.file_systems() {
            let tags = tags_of(fs);
            let id = fs.file_system_id().unwrap_or_default();
            if tags.get(TAG).map(String::as_str) != Some(name) || matches!(fs.lifecycle(), Some(FileSystemLifecycle::Deleting)) {
                continue;
            }
            if census.admit(KIND, &format!("{name} ({id})"), marker_in(&tags), fs.creation_time().map(|t| t.to_string()).as_deref()) {
                return Ok(Some(id.to_owned()));
            }
            census.set_import_id(api::resource_id(&aws.region, id));
        }
        match pages.next(out.next_token().filter(|t| !t.is_empty()).map(str::to_owned), "listing file systems")? {
            Some(t) => token = Some(t),
            None => return Ok(None),
        }
    }
}

/// Waits until the file system is AVAILABLE, reporting FSx's failure detail if it fails.
async fn wait_available(ctx: &Context, aws: &Aws, fs_id: &str, timeout: Duration) -> Result<FsLive, CloudError> {
    // The file system was just made or adopted by this owner.
    let reading = Census::reading();
    let reading = &reading;
    crate::clouds::shared::wait_for(ctx, &format!("file system {fs_id} to become AVAILABLE"), timeout, || async move {
        let Some(live) = observe(aws, fs_id, reading).await? else {
            return Err(format!("file system {fs_id} disappeared while being created or updated").into());
        };
        match live.fs.lifecycle() {
            Some(FileSystemLifecycle::Available)
                if live.dra.as_ref().is_none_or(|d| d.lifecycle().is_none_or(|l| l.as_str() == "AVAILABLE")) =>
            {
                Ok(Some(live))
            }
            Some(FileSystemLifecycle::Failed | FileSystemLifecycle::Misconfigured) => Err(format!(
                "file system {fs_id} is {}: {}",
                live.fs.lifecycle().map(|l| l.as_str()).unwrap_or_default(),
                live.fs.failure_details().and_then(|d| d.message()).unwrap_or("FSx gave no detail")
            )
            .into()),
            _ => Ok(None),
        }
    })
    .await
}

pub struct Options<'a> {
    pub tags: &'a BTreeMap<String, String>,
    pub stale_tags: &'a [String],
    pub timeout: Duration,
}

/// Creates the file system (or adopts one tagged with its name), or brings an existing one to the spec:
/// capacity up, throughput, metadata IOPS, data repository, tags. Errors carry the id when one exists.
pub async fn converge(
    ctx: &Context,
    aws: &Aws,
    spec: &FilesystemSpec,
    known: Option<&str>,
    o: &Options<'_>,
    census: &Census,
) -> Result<FsLive, (Option<String>, CloudError)> {
    let mut id = match known {
        Some(id) => Some(id.to_owned()),
        None => find_by_name(aws, &spec.name, census).await.map_err(|e| (None, e))?,
    };
    let live = match &id {
        Some(i) => observe(aws, i, census).await.map_err(|e| (id.clone(), e))?,
        None => None,
    };
    census.gate().map_err(|e| (None, e.into()))?;
    let live = match live {
        Some(l) => l,
        None => {
            let f = fabric::observe(aws, &spec.fabric.name, None, &Census::reading()).await.map_err(|e| (None, e))?;
            let sg = f.sg_id().map(str::to_owned).ok_or_else(|| {
                (None, CloudError::other(format!("fabric {} has no security group: apply the fabric first", spec.fabric.name)))
            })?;
            let subnet = f
                .sg_tags()
                .get("hpc:subnet")
                .cloned()
                .ok_or_else(|| (None, CloudError::other(format!("security group {sg} does not record the fabric's subnet"))))?;
            let metadata = match spec.metadata_iops {
                Some(iops) => CreateFileSystemLustreMetadataConfiguration::builder()
                    .mode(MetadataConfigurationMode::UserProvisioned)
                    .iops(iops as i32)
                    .build(),
                None => CreateFileSystemLustreMetadataConfiguration::builder().mode(MetadataConfigurationMode::Automatic).build(),
            };
            let created = aws
                .fsx
                .create_file_system()
                .file_system_type(FileSystemType::Lustre)
                .storage_type(StorageType::Ssd)
                .storage_capacity(spec.capacity_gib as i32)
                .subnet_ids(subnet)
                .security_group_ids(sg)
                .lustre_configuration(
                    CreateFileSystemLustreConfiguration::builder()
                        .deployment_type(LustreDeploymentType::Persistent2)
                        .per_unit_storage_throughput(spec.throughput_per_tib as i32)
                        .data_compression_type(DataCompressionType::Lz4)
                        .metadata_configuration(metadata)
                        .build(),
                )
                .set_tags(Some(fsx_tags(o.tags)))
                .send()
                .await
                // The error keeps its kind (a quota, throttling, a bad request naming its field) and code.
                .map_err(|e| {
                    (None, api::error(&e).context(format!("creating FSx for Lustre file system {} ({} GiB)", spec.name, spec.capacity_gib)))
                })?;
            id = created.file_system().and_then(|f| f.file_system_id()).map(str::to_owned);
            let fs_id = id.clone().unwrap_or_default();
            wait_available(ctx, aws, &fs_id, o.timeout).await.map_err(|e| (id.clone(), e))?
        }
    };
    let fs_id = live.id().to_owned();
    let err = |e: CloudError| (Some(fs_id.clone()), e);

    // Capacity (up only: the plan replaces on a decrease), throughput tier and metadata IOPS.
    let mut update = aws.fsx.update_file_system().file_system_id(&fs_id);
    let mut lustre = UpdateFileSystemLustreConfiguration::builder();
    let mut changed = false;
    if live.capacity() < spec.capacity_gib as i64 {
        update = update.storage_capacity(spec.capacity_gib as i32);
        changed = true;
    }
    if live.throughput_per_tib() != Some(i64::from(spec.throughput_per_tib)) {
        lustre = lustre.per_unit_storage_throughput(spec.throughput_per_tib as i32);
        changed = true;
    }
    if let Some(iops) = spec.metadata_iops
        && live.metadata_iops() != Some(iops as i64)
    {
        let m = UpdateFileSystemLustreMetadataConfiguration::builder()
            .mode(MetadataConfigurationMode::UserProvisioned)
            .iops(iops as i32)
            .build();
        lustre = lustre.metadata_configuration(m);
        changed = true;
    }
    let mut live = live;
    if changed {
        update
            .lustre_configuration(lustre.build())
            .send()
            .await
            .map_err(|e| err(api::error(&e).context(format!("updating file system {fs_id}"))))?;
        live = wait_available(ctx, aws, &fs_id, o.timeout).await.map_err(err)?;
    }

    // Tags.
    let arn = live.fs.resource_arn().unwrap_or_default().to_owned();
    if live.tags() != *o.tags {
        if !o.stale_tags.is_empty() {
            aws.fsx
                .untag_resource()
                .resource_arn(&arn)
                .set_tag_keys(Some(o.stale_tags.to_vec()))
                .send()
                .await
                .map_err(|e| err(api::error(&e).context(format!("removing tags from {fs_id}"))))?;
        }
        aws.fsx
            .tag_resource()
            .resource_arn(&arn)
            .set_tags(Some(fsx_tags(o.tags)))
            .send()
            .await
            .map_err(|e| err(api::error(&e).context(format!("tagging {fs_id}"))))?;
    }

    // The data repository association.
    let current =
        live.dra.as_ref().and_then(|d| Some((d.association_id()?.to_owned(), d.data_repository_path().unwrap_or_default().to_owned())));
    let wanted = spec.data_repository.as_deref();
    if let Some((aid, path)) = &current
        && Some(path.as_str()) != wanted
    {
        aws.fsx
            .delete_data_repository_association()
            .association_id(aid)
            .delete_data_in_file_system(false)
            .send()
            .await
            .map_err(|e| err(api::error(&e).context(format!("unlinking {path} from {fs_id}"))))?;
        // FSx deletes it asynchronously (DELETING) and a path holds one association: the new one can only
        // be made once the old one is gone.
        wait_dra_gone(ctx, aws, aid, o.timeout).await.map_err(err)?;
    }
    if let Some(repo) = wanted
        && current.as_ref().map(|c| c.1.as_str()) != Some(repo)
    {
        let events = [EventType::New, EventType::Changed, EventType::Deleted];
        aws.fsx
            .create_data_repository_association()
            .file_system_id(&fs_id)
            .file_system_path("/")
            .data_repository_path(repo)
            .s3(S3DataRepositoryConfiguration::builder()
                .auto_import_policy(AutoImportPolicy::builder().set_events(Some(events.to_vec())).build())
                .auto_export_policy(AutoExportPolicy::builder().set_events(Some(events.to_vec())).build())
                .build())
            .set_tags(Some(fsx_tags(o.tags)))
            .send()
            .await
            .map_err(|e| err(api::error(&e).context(format!("linking {repo} to {fs_id}"))))?;
        live = wait_available(ctx, aws, &fs_id, o.timeout).await.map_err(err)?;
    }
    Ok(live)
}

/// Waits until FSx no longer knows the data repository association (DataRepositoryAssociationNotFound).
async fn wait_dra_gone(ctx: &Context, aws: &Aws, aid: &str, timeout: Duration) -> Result<(), CloudError> {
    crate::clouds::shared::wait_for(ctx, &format!("data repository association {aid} to be deleted"), timeout, || async move {
        match aws.fsx.describe_data_repository_associations().association_ids(aid).send().await {
            Err(e) if api::code(&e) == Some("DataRepositoryAssociationNotFound") => Ok(Some(())),
            Ok(out) if out.associations().is_empty() => Ok(Some(())),
            Ok(out) => match out.associations().iter().find(|d| d.lifecycle().is_some_and(|l| l.as_str() == "FAILED")) {
                Some(d) => Err(format!(
                    "data repository association {aid} failed to delete: {}",
                    d.failure_details().and_then(|f| f.message()).unwrap_or("FSx gave no detail")
                )
                .into()),
                None => Ok(None),
            },
            Err(e) => Err(api::error(&e).context(format!("reading data repository association {aid}"))),
        }
    })
    .await
}

/// Deletes the file system if it is the census's (its associations go with it, data in S3 stays) and waits
/// until it is gone.
pub async fn delete(ctx: &Context, aws: &Aws, fs_id: &str, timeout: Duration, census: &Census) -> Result<(), CloudError> {
    if observe(aws, fs_id, census).await?.is_none() {
        // Gone, or another owner's: nothing of this one's to delete.
        return Ok(());
    }
    match aws.fsx.delete_file_system().file_system_id(fs_id).send().await {
        Ok(_) => {}
        Err(e) if api::code(&e) == Some("FileSystemNotFound") => return Ok(()),
        Err(e) => return Err(api::error(&e).context(format!("deleting file system {fs_id}"))),
    }
    crate::clouds::shared::wait_for(ctx, &format!("file system {fs_id} to be deleted"), timeout, || async move {
        match aws.fsx.describe_file_systems().file_system_ids(fs_id).send().await {
            Err(e) if api::code(&e) == Some("FileSystemNotFound") => Ok(Some(())),
            Ok(out) if out.file_systems().is_empty() => Ok(Some(())),
            Ok(_) => Ok(None),
            Err(e) => Err(api::error(&e).context(format!("reading file system {fs_id}"))),
        }
    })
    .await
}

/// The configuration an import reconstructs from the file system, its tags, and the fabric and cluster
/// those tags name.
pub async fn imported_config(aws: &Aws, live: &FsLive, defaults: &BTreeMap<String, String>) -> Result<Value, CloudError> {
    let tags = live.tags();
    let fs_id = live.id();
    let name = tags
        .get(TAG)
        .cloned()
        .ok_or_else(|| CloudError::other(format!("file system {fs_id} has no {TAG} tag naming it; tag it with the resource's name")))?;
    let fabric_name = tags.get(fabric::TAG).cloned().ok_or_else(|| {
        format!("file system {fs_id} has no {} tag; tag it with the name of the fabric whose network it is in", fabric::TAG)
    })?;
    let reading = Census::reading();
    let f = fabric::observe(aws, &fabric_name, None, &reading).await?;
    let fabric_config = fabric::imported_config(&aws.region, &fabric_name, &f, defaults)?;
    let fabric_ref = Value::object([
        ("id", Value::from(api::resource_id(&aws.region, &fabric_name))),
        ("cloud", Value::from("aws")),
        ("region", Value::from(aws.region.as_str())),
        ("zone", fabric_config.get("zone").clone()),
        ("name", Value::from(fabric_name.as_str())),
        ("instance_type", fabric_config.get("instance_type").clone()),
        ("placement", fabric_config.get("placement").clone()),
    ]);
    let cluster_ref = match tags.get(super::cluster::TAG) {
        Some(cluster) => {
            let nodes = super::cluster::nodes(aws, cluster, &reading).await?;
            let template = super::cluster::template(aws, cluster, &reading).await?;
            let per_node = fabric_config
                .get("instance_type")
                .as_str()
                .and_then(|t| crate::catalog::find_sku(crate::catalog::Cloud::Aws, t))
                .map_or(0, |s| i64::from(s.gpu_count));
            let lt_tags = match template {
                Some(_) => aws
                    .ec2
                    .describe_launch_templates()
                    .launch_template_names(super::cluster::template_name(cluster))
                    .send()
                    .await
                    .ok()
                    .and_then(|o| o.launch_templates().first().map(|t| api::tag_map(t.tags())))
                    .unwrap_or_default(),
                None => BTreeMap::new(),
            };
            Value::object([
                ("id", Value::from(api::resource_id(&aws.region, cluster))),
                ("name", Value::from(cluster.as_str())),
                ("gpus_total", Value::int(nodes.len() as i64 * per_node)),
                ("workload", Value::from(lt_tags.get("hpc:workload").cloned().unwrap_or_else(|| "pretraining".into()))),
            ])
        }
        None => Value::Null,
    };
    let user = crate::clouds::shared::user_tags(crate::catalog::Cloud::Aws, &tags, defaults);
    Ok(Value::object([
        ("name", Value::from(name)),
        ("fabric", fabric_ref),
        ("cluster", cluster_ref),
        ("capacity_gib", Value::int(live.capacity())),
        ("throughput_per_tib", Value::from(live.throughput_per_tib())),
        ("data_repository", Value::from(live.dra.as_ref().and_then(|d| d.data_repository_path()).map(str::to_owned))),
        ("metadata_iops", Value::from(live.metadata_iops())),
        ("tags", if user.is_empty() { Value::Null } else { Value::Map(user.into_iter().map(|(k, v)| (k, Value::from(v))).collect()) }),
    ]))
}

/// The FSx file system id in a filesystem state's `aws/<region>/<fs id>`.
fn fs_id_of(state: &Value) -> Option<String> {
    api::parse_id(state.get("id").as_str()?).map(|(_, id)| id.to_owned())
}

/// A filesystem state brought to what exists: capacity, tier and mount point as found; a vanished data
/// repository association marked missing.
fn refreshed_filesystem(state: &Value, live: &filesystem::FsLive) -> Value {
    let mut out = state.as_map().cloned().unwrap_or_default();
    let capacity = live.capacity();
    let tier = live.throughput_per_tib().unwrap_or_default();
    out.insert("capacity_gib".into(), Value::int(capacity));
    out.insert("throughput_per_tib".into(), Value::int(tier));
    out.insert("throughput_mbps".into(), Value::int(crate::clouds::shared::throughput_mbps(capacity, tier, 1024)));
    out.insert("filesystem_name".into(), Value::from(live.mount_name()));
    out.insert("mount_target".into(), Value::from(live.dns()));
    out.insert("mount_command".into(), Value::from(live.mount_command()));
    if state.get("metadata_iops").is_present() {
        out.insert("metadata_iops".into(), Value::from(live.metadata_iops()));
    }
    let mut expansion = shared::patch_piece(
        state.get("expansion"),
        "aws_fsx_lustre_file_system",
        None,
        &[("storage_capacity", capacity.to_string()), ("per_unit_storage_throughput", tier.to_string())],
    );
    if live.dra.is_none() {
        expansion = shared::mark_missing(&expansion, |k| k != "aws_fsx_data_repository_association");
    } else if let Some(path) = live.dra.as_ref().and_then(|d| d.data_repository_path()) {
        out.insert("data_repository".into(), Value::from(path));
        expansion =
            shared::patch_piece(&expansion, "aws_fsx_data_repository_association", None, &[("data_repository_path", path.to_owned())]);
    }
    out.insert("expansion".into(), expansion);
    Value::Map(out)
}

/// What FSx assigned: the id, the mount name, the DNS name and the mount command made of them.
fn assigned_by_fsx(region: &str, live: &filesystem::FsLive) -> [(&'static str, Value); 4] {
    [
        ("id", Value::from(api::resource_id(region, live.id()))),
        ("filesystem_name", Value::from(live.mount_name())),
        ("mount_target", Value::from(live.dns())),
        ("mount_command", Value::from(live.mount_command())),
    ]
}

#[async_trait]
impl Backend<FilesystemSpec> for backend::Aws {
    async fn configured(&self, _ctx: &Context) -> Result<(), CloudError> {
        // The SDK's credential chain is resolved per call; a client is always made.
        Ok(())
    }

    /// FSx assigns the id; `apply` writes it.
    fn id(&self, _spec: &FilesystemSpec) -> Option<String> {
        None
    }

    fn place(&self, v: &Value) -> String {
        match fs_id_of(v) {
            Some(fs_id) => format!("({fs_id}) in {}", fabric_region(v)),
            None => format!("in {}", fabric_region(v)),
        }
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, FilesystemSpec>) -> Outcome {
        let spec = change.spec;
        let region = spec.fabric.region.as_str();
        let client = api::connect(step.ctx, region).await;
        let stale = change.stale_tags();
        let options = filesystem::Options { tags: change.tags, stale_tags: &stale, timeout: step.timeout };
        let known = fs_id_of(change.prior);
        match filesystem::converge(step.ctx, &client, spec, known.as_deref(), &options, step.census).await {
            Ok(live) => {
                let state = assigned_by_fsx(region, &live).into_iter().fold(change.state.clone(), |s, (k, v)| shared::with_attr(&s, k, v));
                Outcome::done(state)
            }
            Err((id, e)) => {
                let state = match id {
                    // Keep track of what exists: a failed create is tainted and replaced by the next apply.
                    Some(fs_id) => {
                        let state = shared::with_attr(change.state, "id", Value::from(api::resource_id(region, &fs_id)));
                        match filesystem::observe(&client, &fs_id, step.census).await {
                            Ok(Some(live)) => refreshed_filesystem(&state, &live),
                            _ => state,
                        }
                    }
                    None if change.creating() => Value::Null,
                    None => change.prior.clone(),
                };
                Outcome::failed(state, e)
            }
        }
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, _spec: Option<&FilesystemSpec>) -> Outcome {
        let client = api::connect(step.ctx, fabric_region(prior)).await;
        let Some(fs_id) = fs_id_of(prior) else { return Outcome::done(Value::Null) };
        let done = filesystem::delete(step.ctx, &client, &fs_id, step.timeout, step.census).await;
        Outcome::of(done, Value::Null, || prior.clone())
    }

    async fn read(&self, step: &Step<'_>, state: &Value, _spec: Option<&FilesystemSpec>) -> Result<Option<Value>, CloudError> {
        let Some(fs_id) = fs_id_of(state) else { return Ok(None) };
        let client = api::connect(step.ctx, fabric_region(state)).await;
        let live = filesystem::observe(&client, &fs_id, step.census).await?;
        Ok(live.map(|live| refreshed_filesystem(state, &live)))
    }

    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError> {
        let Some((region, key)) = api::parse_id(id) else {
            return Err(ImportError::BadId(format!(
                "{id:?} is not an AWS filesystem id: give \"aws/<region>/<file system id or name>\", e.g. \"aws/us-east-1/fs-0123456789abcdef0\"."
            )));
        };
        let client = api::connect(step.ctx, region).await;
        let fs_id = if key.starts_with("fs-") {
            Some(key.to_owned())
        } else {
            filesystem::find_by_name(&client, key, step.census).await.map_err(ImportError::failed)?
        };
        let live = match fs_id {
            Some(fs_id) => filesystem::observe(&client, &fs_id, step.census).await.map_err(ImportError::failed)?,
            None => None,
        };
        let Some(live) = live else {
            return Err(ImportError::failed(format!("no such FSx for Lustre file system in {region}")));
        };
        let config = filesystem::imported_config(&client, &live, step.default_tags).await.map_err(ImportError::failed)?;
        let assigned = assigned_by_fsx(region, &live).into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        Ok(Imported::new(config, assigned))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(kind: &str, name: &str) -> Value {
        Value::object([
            ("kind", Value::from(kind)),
            ("name", Value::from(name)),
            ("count", Value::int(1)),
            ("settings", Value::object([("names", Value::from("x")), ("data_repository_path", Value::from("s3://old"))])),
        ])
    }

    fn missing(state: &Value) -> Vec<String> {
        let pieces = state.get("expansion").as_list().unwrap_or_default().to_vec();
        pieces
            .iter()
            .filter(|p| p.get("settings").get("missing").is_present())
            .map(|p| p.get("kind").as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn the_fsx_id_comes_from_the_filesystem_id() {
        let state = |id: Value| Value::object([("id", id), ("fabric", Value::object([("region", Value::from("us-east-1"))]))]);
        assert_eq!(fs_id_of(&state(Value::from("aws/us-east-1/fs-0123"))), Some("fs-0123".to_owned()));
        for bad in [Value::Null, Value::Unknown, Value::from("fs-0123"), Value::from("gcp/us-east-1/fs-0123")] {
            assert_eq!(fs_id_of(&state(bad.clone())), None, "{bad:?}");
        }
        let fs: &dyn Backend<FilesystemSpec> = &backend::Aws;
        assert_eq!(fs.place(&state(Value::from("aws/us-east-1/fs-0123"))), "(fs-0123) in us-east-1");
        assert_eq!(fs.place(&state(Value::Null)), "in us-east-1");
    }

    #[test]
    fn a_filesystem_refresh_takes_fsx_values_and_marks_a_vanished_association_missing() {
        use aws_sdk_fsx::types::{FileSystem, LustreFileSystemConfiguration};
        let fs = FileSystem::builder()
            .file_system_id("fs-0123")
            .storage_capacity(2400)
            .dns_name("fs-0123.fsx.us-east-1.amazonaws.com")
            .lustre_configuration(LustreFileSystemConfiguration::builder().mount_name("abcd").per_unit_storage_throughput(250).build())
            .build();
        let state = Value::object([
            ("capacity_gib", Value::int(1200)),
            ("metadata_iops", Value::Null),
            (
                "expansion",
                Value::list([piece("aws_fsx_lustre_file_system", "scratch"), piece("aws_fsx_data_repository_association", "scratch-dra")]),
            ),
        ]);
        let out = refreshed_filesystem(&state, &filesystem::FsLive { fs, dra: None });
        assert_eq!(out.get("capacity_gib"), &Value::int(2400));
        assert_eq!(out.get("throughput_mbps"), &Value::int(2400 * 250 / 1024));
        assert_eq!(out.get("filesystem_name").as_str(), Some("abcd"));
        assert_eq!(out.get("metadata_iops"), &Value::Null);
        assert_eq!(
            out.get("mount_command").as_str(),
            Some("sudo mkdir -p /fsx && sudo mount -t lustre -o relatime,flock fs-0123.fsx.us-east-1.amazonaws.com@tcp:/abcd /fsx")
        );
        assert_eq!(missing(&out), ["aws_fsx_data_repository_association"]);
    }
}
