//! `hpc_slurm_cluster` on AWS: a subnet of its own in the fabric's VPC (the network's last /28), the
//! controllers at their fixed addresses and the login nodes, each one instance in the fabric's EFA security
//! group (open within itself, so the nodes and the controllers reach each other), set up by their first
//! boot (`clouds::slurm::setup_script`), their Slurm configuration in their tags (`hpc:slurm-config` and its
//! chunks, which they read through the instance metadata service), rewritten there when it changes. Every
//! piece carries `hpc:slurm = <name>` and the owner's marker; only the census's pieces are changed or
//! deleted, and the fabric's are only read.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_ec2::types::{Instance, InstanceType, ResourceType};
use base64::Engine;

use super::api::{self, Aws, filter, tag_filter, tag_spec};
use super::backend::{self, fabric_region};
use crate::clouds::backend::{Backend, Change, ImportError, Imported, Outcome, Step};
use crate::clouds::error::CloudError;
use crate::clouds::shared::{SlurmHostFound, SlurmHostsLive};
use crate::clouds::slurm::{Role, SlurmConfig, aws_config_tags, aws_payload, aws_revision, channel, setup_script, slurm_config};
use crate::framework::{Context, Value};
use crate::model::SlurmPlan;
use crate::model::SlurmSpec;
use crate::ownership::Census;

pub const TAG: &str = "hpc:slurm";
const ROLE_TAG: &str = "hpc:slurm-role";

/// EC2's tags per resource, which on AWS carry the configuration beside the provider's own, the provider's
/// `default_tags` and the resource's `tags`.
const TAGS_PER_RESOURCE: usize = 50;

/// The configuration travels in the controllers' and login nodes' tags: refused at plan time when it and
/// the other tags do not fit EC2's 50 per instance.
pub fn tags_fit(spec: &SlurmSpec, config: &SlurmConfig, d: &crate::model::Defaults, diags: &mut crate::framework::Diagnostics) -> bool {
    let mut user = d.default_tags.clone();
    user.extend(spec.tags.clone());
    // Name, hpc:slurm, hpc:fabric, hpc:owner and hpc:slurm-role.
    let ours = 5;
    let config_tags = aws_config_tags(config).len();
    if user.len() + ours + config_tags <= TAGS_PER_RESOURCE {
        return true;
    }
    diags.error_at(
        crate::framework::AttributePath::attr("tags"),
        "The Slurm configuration does not fit the instances' tags",
        format!(
            "On AWS the controllers and login nodes read their configuration from their tags: it takes {config_tags} tags \
             ({} characters, compressed), the provider's own {ours}, and default_tags and tags {}, over EC2's {TAGS_PER_RESOURCE} per \
             instance. Set fewer tags on this resource, or split its partitions over two Slurm clusters.",
            config.payload.len(),
            user.len()
        ),
    );
    false
}

/// What exists of a Slurm cluster: its subnet and its instances by host name.
#[derive(Debug, Default)]
pub struct SlurmLive {
    pub subnet: Option<String>,
    pub hosts: BTreeMap<String, Instance>,
}

impl SlurmLive {
    fn is_empty(&self) -> bool {
        self.subnet.is_none() && self.hosts.is_empty()
    }
}

/// One filtered call per kind: the subnet and the instances tagged with the cluster, those the census admits.
pub async fn observe(aws: &Aws, name: &str, census: &Census) -> Result<SlurmLive, CloudError> {
    let subnets = aws
        .ec2
        .describe_subnets()
        .filters(tag_filter(TAG, name))
        .send()
        .await
        .map_err(|e| api::error(&e).context("listing the Slurm cluster's subnet"))?;
    let subnet = subnets
        .subnets()
        .iter()
        .filter(|s| census.admit_tagged("aws_subnet", s.subnet_id().unwrap_or_default(), &api::tag_map(s.tags()), None))
        .find_map(|s| s.subnet_id().map(str::to_owned));
    let out = aws
        .ec2
        .describe_instances()
        .filters(tag_filter(TAG, name))
        .filters(filter("instance-state-name", &["pending", "running", "stopping", "stopped"]))
        .send()
        .await
        .map_err(|e| api::error(&e).context("listing the Slurm cluster's instances"))?;
    let mut hosts = BTreeMap::new();
    for i in out.reservations().iter().flat_map(|r| r.instances()) {
        let tags = api::tag_map(i.tags());
        let Some(host) = tags.get("Name").cloned() else { continue };
        if census.admit_tagged("aws_instance", &host, &tags, None) {
            hosts.insert(host, i.clone());
        }
    }
    Ok(SlurmLive { subnet, hosts })
}

/// The fabric's VPC and EFA security group, read (never changed).
async fn fabric_pieces(aws: &Aws, spec: &SlurmSpec) -> Result<(String, String), CloudError> {
    let live = super::fabric::observe(aws, &spec.fabric.name, None, &Census::reading()).await?;
    let vpc = live.vpc.as_ref().map(|v| v.0.clone());
    let sg = live.sg_id().map(str::to_owned);
    match (vpc, sg) {
        (Some(v), Some(s)) => Ok((v, s)),
        _ => Err(CloudError::other(format!("fabric {} has no VPC or security group: apply the fabric first", spec.fabric.name))),
    }
}

/// Makes what is missing: the subnet, then each controller at its address, then the login nodes; writes a
/// changed configuration and changed tags (`retag`: the keys to remove) onto what exists; waits until every
/// instance runs.
#[allow(clippy::too_many_arguments)]
pub async fn converge(
    ctx: &Context,
    aws: &Aws,
    spec: &SlurmSpec,
    plan: &SlurmPlan,
    tags: &BTreeMap<String, String>,
    retag: Option<&[String]>,
    timeout: Duration,
    census: &Census,
) -> Result<SlurmLive, CloudError> {
    let live = observe(aws, &spec.name, census).await?;
    census.gate()?;
    let (vpc, sg) = fabric_pieces(aws, spec).await?;
    let subnet = match &live.subnet {
        Some(s) => s.clone(),
        None => {
            let zone = spec.fabric.zone.as_deref().unwrap_or_default();
            let subnet_tags = with_name(tags, &format!("{}-control", spec.name));
            super::fabric::create_subnet(aws, &vpc, &plan.control_subnet, zone, &subnet_tags)
                .await
                .map_err(|e| e.context(format!("creating subnet {}-control ({})", spec.name, plan.control_subnet)))?
        }
    };
    let image = match &spec.image {
        Some(i) => i.clone(),
        None => super::cluster::default_image(aws).await?,
    };
    let config = slurm_config(plan, spec.key.as_ref().map(|k| k.expose_str()));
    let config_tags: BTreeMap<String, String> = aws_config_tags(&config).into_iter().collect();
    // The hosts that exist and carry another configuration: their tags are rewritten (their sync program reads
    // them within a minute), and chunks the new one does not have removed.
    let stale: Vec<&Instance> =
        live.hosts.values().filter(|i| aws_revision(&api::tag_map(i.tags())).as_deref() != Some(config.revision.as_str())).collect();
    if !stale.is_empty() {
        let ids: Vec<String> = stale.iter().filter_map(|i| i.instance_id().map(str::to_owned)).collect();
        let mut extra: Vec<String> = stale
            .iter()
            .flat_map(|i| api::tag_map(i.tags()).into_keys())
            .filter(|k| k.starts_with(&format!("{}-", channel::AWS_TAG)) && !config_tags.contains_key(k))
            .collect();
        extra.sort();
        extra.dedup();
        super::fabric::retag(aws, &ids, &config_tags, &extra)
            .await
            .map_err(|e| e.context(format!("writing Slurm configuration {} to {}", config.revision, ids.join(", "))))?;
    }
    if let Some(stale) = retag {
        let mut ids: Vec<String> = live.hosts.values().filter_map(|i| i.instance_id().map(str::to_owned)).collect();
        ids.extend(live.subnet.clone());
        if !ids.is_empty() {
            super::fabric::retag(aws, &ids, tags, stale).await.map_err(|e| e.context("retagging the Slurm cluster's pieces"))?;
        }
    }
    let mut wanted: Vec<(String, Role, Option<String>, &str)> =
        plan.controllers.iter().map(|(h, a)| (h.clone(), Role::Controller, Some(a.clone()), spec.controller_type.as_str())).collect();
    wanted.extend(plan.logins.iter().map(|h| (h.clone(), Role::Login, None, spec.login_type.as_str())));
    for (host, role, address, instance_type) in wanted {
        if live.hosts.contains_key(&host) {
            continue;
        }
        let script = setup_script(spec, role, &host, spec.key.as_ref().map(|k| k.expose_str()));
        let mut host_tags = with_name(tags, &host);
        host_tags.insert(ROLE_TAG.into(), role.as_str().into());
        host_tags.extend(config_tags.clone());
        let mut run = aws
            .ec2
            .run_instances()
            .image_id(&image)
            .instance_type(InstanceType::from(instance_type))
            .min_count(1)
            .max_count(1)
            .subnet_id(&subnet)
            .security_group_ids(&sg)
            .user_data(base64::engine::general_purpose::STANDARD.encode(&script))
            .client_token(api::client_token())
            // The configuration is in the instance's tags, which EC2 serves through the instance metadata
            // service only when InstanceMetadataTags is enabled; the setup and sync read it there.
            .metadata_options(
                aws_sdk_ec2::types::InstanceMetadataOptionsRequest::builder()
                    .http_tokens(aws_sdk_ec2::types::HttpTokensState::Required)
                    .instance_metadata_tags(aws_sdk_ec2::types::InstanceMetadataTagsState::Enabled)
                    .build(),
            )
            .tag_specifications(tag_spec(ResourceType::Instance, &host_tags));
        if let Some(a) = &address {
            run = run.private_ip_address(a);
        }
        run.send().await.map_err(|e| api::error(&e).context(format!("launching {host}")))?;
    }
    let hosts = plan.controllers.len() + plan.logins.len();
    crate::clouds::shared::wait_for(ctx, &format!("the Slurm cluster's {hosts} instance(s) to run"), timeout, || async {
        let now = observe(aws, &spec.name, census).await?;
        let running = now.hosts.values().filter(|i| i.state().and_then(|s| s.name()).is_some_and(|s| s.as_str() == "running")).count();
        Ok::<_, CloudError>((running >= hosts).then_some(now))
    })
    .await
}

/// A Slurm cluster's region: its fabric's, or an imported one's (whose fabric the first plan fills) its id's.
fn region_of(state: &Value) -> &str {
    match fabric_region(state) {
        "" => state.get("id").as_str().and_then(api::parse_id).map_or("", |(r, _)| r),
        r => r,
    }
}

fn with_name(tags: &BTreeMap<String, String>, name: &str) -> BTreeMap<String, String> {
    let mut t = tags.clone();
    t.insert("Name".into(), name.to_owned());
    t
}

/// Terminates the instances, then deletes the subnet.
pub async fn delete(ctx: &Context, aws: &Aws, name: &str, timeout: Duration, census: &Census) -> Result<(), CloudError> {
    let live = observe(aws, name, census).await?;
    let ids: Vec<String> = live.hosts.values().filter_map(|i| i.instance_id().map(str::to_owned)).collect();
    if !ids.is_empty() {
        super::cluster::terminate(ctx, aws, &ids, timeout).await?;
    }
    if let Some(subnet) = live.subnet {
        match aws.ec2.delete_subnet().subnet_id(&subnet).send().await {
            Ok(_) => {}
            Err(e) if api::error(&e).is_not_found() => {}
            Err(e) => return Err(api::error(&e).context(format!("deleting subnet {name}-control ({subnet})"))),
        }
    }
    Ok(())
}

/// The state with what exists: the login nodes' addresses and the login command; the pieces gone marked
/// missing in the expansion, so the next plan makes them again.
fn with_live(state: &Value, live: &SlurmLive) -> Value {
    let address = |host: &str| live.hosts.get(host).and_then(|i| i.private_ip_address()).map(str::to_owned);
    let (_, logins) = crate::clouds::shared::slurm_hosts(state);
    let name = state.get("name").as_str().unwrap_or_default();
    let exists = |kind: &str, piece: &str| match kind {
        "aws_subnet" => live.subnet.is_some(),
        _ if piece == format!("{name}-login") => logins.iter().all(|h| live.hosts.contains_key(h)),
        _ => live.hosts.contains_key(piece),
    };
    let revision = |host: &str| live.hosts.get(host).map(|i| aws_revision(&api::tag_map(i.tags())));
    // The Deep Learning AMI's user (Ubuntu).
    crate::clouds::shared::slurm_state(state, "ubuntu", exists, SlurmHostsLive { address: &address, revision: &revision })
}

#[async_trait]
impl Backend<SlurmSpec> for backend::Aws {
    async fn configured(&self, _ctx: &Context) -> Result<(), CloudError> {
        Ok(())
    }

    fn id(&self, spec: &SlurmSpec) -> Option<String> {
        Some(api::resource_id(&spec.fabric.region, &spec.name))
    }

    fn place(&self, v: &Value) -> String {
        format!("in {}", region_of(v))
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, SlurmSpec>) -> Outcome {
        let spec = change.spec;
        let client = api::connect(step.ctx, &spec.fabric.region).await;
        let Some(plan) = SlurmPlan::from_state(change.planned) else {
            return Outcome::failed(change.prior.clone(), CloudError::other("the plan does not say the Slurm configuration"));
        };
        let stale = change.stale_tags();
        let retag = change.retag().then_some(stale.as_slice());
        match converge(step.ctx, &client, spec, &plan, change.tags, retag, step.timeout, step.census).await {
            Ok(live) => Outcome::done(with_live(change.state, &live)),
            Err(e) => match observe(&client, &spec.name, step.census).await {
                Ok(live) => Outcome::failed(with_live(change.state, &live), e),
                Err(_) => Outcome::failed(change.state.clone(), e),
            },
        }
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, _spec: Option<&SlurmSpec>) -> Outcome {
        let name = prior.get("name").as_str().unwrap_or_default();
        let client = api::connect(step.ctx, region_of(prior)).await;
        match delete(step.ctx, &client, name, step.timeout, step.census).await {
            Ok(()) => Outcome::done(Value::Null),
            Err(e) => match observe(&client, name, step.census).await {
                Ok(live) if live.is_empty() => Outcome::failed(Value::Null, e),
                Ok(live) => Outcome::failed(with_live(prior, &live), e),
                Err(_) => Outcome::failed(prior.clone(), e),
            },
        }
    }

    async fn read(&self, step: &Step<'_>, state: &Value, _spec: Option<&SlurmSpec>) -> Result<Option<Value>, CloudError> {
        let name = state.get("name").as_str().unwrap_or_default();
        let client = api::connect(step.ctx, region_of(state)).await;
        let live = observe(&client, name, step.census).await?;
        Ok((!live.is_empty()).then(|| with_live(state, &live)))
    }

    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError> {
        let Some((region, name)) = api::parse_id(id) else {
            return Err(ImportError::BadId(format!(
                "{id:?} is not an AWS Slurm cluster id: give \"aws/<region>/<Slurm cluster name>\", e.g. \"aws/us-east-1/ml\"."
            )));
        };
        let client = api::connect(step.ctx, region).await;
        let live = observe(&client, name, step.census).await.map_err(ImportError::failed)?;
        let hosts: Vec<SlurmHostFound> = live
            .hosts
            .iter()
            .map(|(host, i)| SlurmHostFound {
                host: host.clone(),
                instance_type: i.instance_type().map(|t| t.as_str().to_owned()).unwrap_or_default(),
                tags: api::tag_map(i.tags()),
                // The hosts take no key pair here: nothing to read back.
                ssh_public_key: None,
            })
            .collect();
        let payload = hosts.iter().find(|h| h.host == crate::nodes::controller_name(name, 0)).and_then(|h| aws_payload(&h.tags));
        crate::clouds::shared::slurm_imported(crate::catalog::Cloud::Aws, id, region, name, &hosts, payload.as_deref(), step.default_tags)
    }
}
