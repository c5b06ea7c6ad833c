//! `hpc_slurm_cluster` on OCI: a subnet of its own in the fabric's VCN (the network's last /28), the
//! controllers at their fixed addresses and the login nodes, each one instance whose VNIC is in the
//! fabric's network security group (open within itself), set up by their first boot
//! (`clouds::slurm::setup_script`), their Slurm configuration in their metadata (`hpc_slurm_config`,
//! rewritten by UpdateInstance under its etag when it changes). Every piece carries `hpc:slurm = <name>`
//! and the owner's marker; only
//! the census's pieces are changed or deleted, and the fabric's are only read.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine;
use serde_json::{Value as Json, json};

use super::api::{self, Oci, Service, encode, tags_of};
use super::backend::{self, configured, fabric_place, fabric_region, no_fabric_id, summary};
use crate::clouds::backend::{Backend, Change, ImportError, Imported, Outcome, Step};
use crate::clouds::error::CloudError;
use crate::clouds::shared;
use crate::clouds::slurm::{Role, channel, setup_script, slurm_config};
use crate::framework::{Context, Value};
use crate::model::SlurmPlan;
use crate::model::SlurmSpec;
use crate::ownership::{Census, marker_in};

const TAG: &str = "hpc:slurm";

/// What exists of a Slurm cluster: its subnet and its instances by host name.
#[derive(Debug, Default)]
struct SlurmLive {
    subnet: Option<Json>,
    hosts: BTreeMap<String, Json>,
}

impl SlurmLive {
    fn is_empty(&self) -> bool {
        self.subnet.is_none() && self.hosts.is_empty()
    }
}

/// The subnets and the instances of the compartment tagged with the cluster, those the census admits.
async fn observe(ctx: &Context, oci: &Oci, compartment: &str, name: &str, census: &Census) -> Result<SlurmLive, CloudError> {
    let ours = |item: &Json, kind: &str| {
        let tags = tags_of(item);
        tags.get(TAG).map(String::as_str) == Some(name)
            && !api::is_gone(item)
            && census.admit(kind, item["displayName"].as_str().unwrap_or_default(), marker_in(&tags), item["timeCreated"].as_str())
    };
    let q = format!("compartmentId={}", encode(compartment));
    let subnet = oci.list(ctx, Service::Core, "subnets", &q).await?.into_iter().find(|s| ours(s, "oci_core_subnet"));
    let mut hosts = BTreeMap::new();
    for i in oci.list(ctx, Service::Core, "instances", &q).await? {
        if ours(&i, "oci_core_instance") {
            hosts.insert(i["displayName"].as_str().unwrap_or_default().to_owned(), i);
        }
    }
    Ok(SlurmLive { subnet, hosts })
}

/// The newest platform image OCI offers for a shape.
async fn default_image(ctx: &Context, oci: &Oci, compartment: &str, shape: &str) -> Result<String, CloudError> {
    let q = format!("compartmentId={}&shape={}&sortBy=TIMECREATED&sortOrder=DESC", encode(compartment), encode(shape));
    let images = oci.list(ctx, Service::Core, "images", &q).await?;
    images
        .first()
        .and_then(|i| i["id"].as_str().map(str::to_owned))
        .ok_or_else(|| CloudError::other(format!("OCI offers no image for shape {shape} in this region: set image to an image OCID")))
}

/// A flexible shape's size: 4 OCPUs and 32 GB, the controllers' 8 vCPUs and 32 GiB.
fn shape_config(shape: &str) -> Option<Json> {
    shape.ends_with(".Flex").then(|| json!({"ocpus": 4, "memoryInGBs": 32}))
}

#[allow(clippy::too_many_arguments)]
async fn converge(
    ctx: &Context,
    oci: &Oci,
    compartment: &str,
    spec: &SlurmSpec,
    plan: &SlurmPlan,
    tags: &BTreeMap<String, String>,
    retag: bool,
    timeout: Duration,
    census: &Census,
) -> Result<(), CloudError> {
    let live = observe(ctx, oci, compartment, &spec.name, census).await?;
    census.gate()?;
    let zone = spec.fabric.zone.clone().unwrap_or_default();
    let joined = super::fabric::join(ctx, oci, compartment, &spec.fabric.name, &zone, false).await?;
    let subnet = match &live.subnet {
        Some(s) => s["id"].as_str().unwrap_or_default().to_owned(),
        None => {
            // The fabric's subnet names its VCN.
            let fabric_subnet = oci
                .get(ctx, Service::Core, &format!("/subnets/{}", joined.subnet))
                .await?
                .ok_or_else(|| CloudError::other(format!("fabric {} has no subnet: apply the fabric again", spec.fabric.name)))?;
            let body = json!({
                "compartmentId": compartment,
                "vcnId": fabric_subnet["vcnId"],
                "cidrBlock": plan.control_subnet,
                "displayName": format!("{}-control", spec.name),
                "prohibitPublicIpOnVnic": true,
                "freeformTags": tags,
            });
            let (made, _) = oci.create(ctx, Service::Core, "subnets", &body, &format!("subnet {}-control", spec.name)).await?;
            let id = made["id"].as_str().unwrap_or_default().to_owned();
            let what = format!("subnet {}-control", spec.name);
            oci.wait_state(ctx, Service::Core, &format!("/subnets/{id}"), &["AVAILABLE"], &["TERMINATED"], &what, timeout).await?;
            id
        }
    };
    let config = slurm_config(plan, spec.key.as_ref().map(|k| k.expose_str()));
    // The instances that exist and carry another configuration: UpdateInstance of their metadata under the
    // etag read (OCI replaces the whole map and refuses a changed user_data or ssh_authorized_keys, so every
    // other key goes back as it is), which their sync program reads from the instance metadata service.
    for (host, i) in &live.hosts {
        if i["metadata"][channel::OCI_REVISION_KEY].as_str() == Some(config.revision.as_str()) {
            continue;
        }
        let id = i["id"].as_str().unwrap_or_default();
        let what = format!("instance {host} (Slurm configuration {})", config.revision);
        oci.rewrite(ctx, Service::Core, &format!("/instances/{id}"), &what, |now| {
            if now["metadata"][channel::OCI_REVISION_KEY].as_str() == Some(config.revision.as_str()) {
                return None;
            }
            let mut metadata = now["metadata"].as_object().cloned().unwrap_or_default();
            metadata.insert(channel::OCI_KEY.into(), json!(config.payload));
            metadata.insert(channel::OCI_REVISION_KEY.into(), json!(config.revision));
            Some(json!({"metadata": metadata}))
        })
        .await?;
    }
    // Changed tags: each instance's and the subnet's freeform tags, under their etags.
    if retag {
        let mut pieces: Vec<(String, String)> = live
            .hosts
            .iter()
            .map(|(h, i)| (format!("/instances/{}", i["id"].as_str().unwrap_or_default()), format!("instance {h}")))
            .collect();
        if let Some(s) = &live.subnet {
            pieces.push((format!("/subnets/{}", s["id"].as_str().unwrap_or_default()), format!("subnet {}-control", spec.name)));
        }
        for (path, what) in pieces {
            oci.rewrite(ctx, Service::Core, &path, &what, |now| {
                (now["freeformTags"] != json!(tags)).then(|| json!({"freeformTags": tags}))
            })
            .await?;
        }
    }
    let mut wanted: Vec<(String, Role, Option<String>, &str)> =
        plan.controllers.iter().map(|(h, a)| (h.clone(), Role::Controller, Some(a.clone()), spec.controller_type.as_str())).collect();
    wanted.extend(plan.logins.iter().map(|h| (h.clone(), Role::Login, None, spec.login_type.as_str())));
    let mut launched = Vec::new();
    for (host, role, address, shape) in wanted {
        if live.hosts.contains_key(&host) {
            continue;
        }
        let image = match &spec.image {
            Some(i) => i.clone(),
            None => default_image(ctx, oci, compartment, shape).await?,
        };
        let script = setup_script(spec, role, &host, spec.key.as_ref().map(|k| k.expose_str()));
        let mut metadata = json!({
            "user_data": base64::engine::general_purpose::STANDARD.encode(&script),
            channel::OCI_KEY: config.payload,
            channel::OCI_REVISION_KEY: config.revision,
        });
        if let Some(key) = &spec.ssh_public_key {
            metadata["ssh_authorized_keys"] = json!(key.trim());
        }
        let mut vnic = json!({"subnetId": subnet, "nsgIds": [joined.nsg], "assignPublicIp": false, "hostnameLabel": host});
        if let Some(a) = &address {
            vnic["privateIp"] = json!(a);
        }
        let mut body = json!({
            "compartmentId": compartment,
            "availabilityDomain": zone,
            "displayName": host,
            "shape": shape,
            "sourceDetails": {"sourceType": "image", "imageId": image},
            "createVnicDetails": vnic,
            "metadata": metadata,
            "freeformTags": tags,
        });
        if let Some(config) = shape_config(shape) {
            body["shapeConfig"] = config;
        }
        let (made, _) = oci.create(ctx, Service::Core, "instances", &body, &format!("instance {host}")).await?;
        launched.push((host, made["id"].as_str().unwrap_or_default().to_owned()));
    }
    for (host, id) in launched {
        let what = format!("instance {host} to run");
        oci.wait_state(ctx, Service::Core, &format!("/instances/{id}"), &["RUNNING"], &["TERMINATED"], &what, timeout).await?;
    }
    Ok(())
}

async fn delete(ctx: &Context, oci: &Oci, compartment: &str, name: &str, timeout: Duration, census: &Census) -> Result<(), CloudError> {
    let live = observe(ctx, oci, compartment, name, census).await?;
    for (host, i) in &live.hosts {
        let id = i["id"].as_str().unwrap_or_default();
        oci.delete(ctx, Service::Core, &format!("/instances/{id}"), &format!("instance {host}"), timeout).await?;
    }
    for (host, i) in &live.hosts {
        let id = i["id"].as_str().unwrap_or_default();
        let what = format!("instance {host} to terminate");
        oci.wait_state(ctx, Service::Core, &format!("/instances/{id}"), &["TERMINATED"], &[], &what, timeout)
            .await
            .or_else(|e| if e.is_not_found() || e.message.contains("vanished") { Ok(Json::Null) } else { Err(e) })?;
    }
    if let Some(s) = &live.subnet {
        let id = s["id"].as_str().unwrap_or_default();
        oci.delete(ctx, Service::Core, &format!("/subnets/{id}"), &format!("subnet {name}-control"), timeout).await?;
    }
    Ok(())
}

/// An imported Slurm cluster's region and compartment (its fabric, which says them otherwise, is filled by
/// the first plan): its id's.
fn imported_place(state: &Value) -> Option<(String, String)> {
    state.get("id").as_str().and_then(api::parse_id).map(|(r, c, _)| (r.to_owned(), c.to_owned()))
}

/// The state with what exists: the login nodes' addresses (their primary VNIC's, from the VNIC attachments)
/// and the pieces gone marked missing.
async fn with_live(ctx: &Context, oci: &Oci, compartment: &str, state: &Value, live: &SlurmLive) -> Value {
    let mut addresses = BTreeMap::new();
    for (host, i) in &live.hosts {
        let q = format!("compartmentId={}&instanceId={}", encode(compartment), encode(i["id"].as_str().unwrap_or_default()));
        let Ok(attachments) = oci.list(ctx, Service::Core, "vnicAttachments", &q).await else { continue };
        let Some(vnic) = attachments.first().and_then(|a| a["vnicId"].as_str()) else { continue };
        if let Ok(Some(v)) = oci.get(ctx, Service::Core, &format!("/vnics/{vnic}")).await
            && let Some(ip) = v["privateIp"].as_str()
        {
            addresses.insert(host.clone(), ip.to_owned());
        }
    }
    let (_, logins) = shared::slurm_hosts(state);
    let name = state.get("name").as_str().unwrap_or_default();
    let exists = |kind: &str, piece: &str| match kind {
        "oci_core_subnet" => live.subnet.is_some(),
        _ if piece == format!("{name}-login") => logins.iter().all(|h| live.hosts.contains_key(h)),
        _ => live.hosts.contains_key(piece),
    };
    let address = |h: &str| addresses.get(h).cloned();
    let revision = |h: &str| live.hosts.get(h).map(|i| i["metadata"][channel::OCI_REVISION_KEY].as_str().map(str::to_owned));
    // The user of OCI's platform images (Oracle Linux).
    shared::slurm_state(state, "opc", exists, shared::SlurmHostsLive { address: &address, revision: &revision })
}

#[async_trait]
impl Backend<SlurmSpec> for backend::Oci {
    async fn configured(&self, ctx: &Context) -> Result<(), CloudError> {
        configured(ctx)
    }

    fn id(&self, _spec: &SlurmSpec) -> Option<String> {
        // The compartment is in the fabric's id, which the spec does not carry: `apply` assigns it.
        None
    }

    fn place(&self, v: &Value) -> String {
        format!("in {}", fabric_region(v))
    }

    fn summary(&self, error: &CloudError) -> Option<&'static str> {
        summary(error)
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, SlurmSpec>) -> Outcome {
        let Some((region, compartment)) = fabric_place(change.planned) else {
            return Outcome::failed(change.prior.clone(), no_fabric_id("Slurm cluster"));
        };
        let client = match api::connect(step.ctx, &region) {
            Ok(c) => c,
            Err(e) => return Outcome::failed(change.prior.clone(), e),
        };
        let spec = change.spec;
        let id = api::resource_id(&region, &compartment, &spec.name);
        step.census.set_import_id(&id);
        let state = shared::with_attr(change.state, "id", Value::from(id));
        let Some(plan) = SlurmPlan::from_state(change.planned) else {
            return Outcome::failed(change.prior.clone(), CloudError::other("the plan does not say the Slurm configuration"));
        };
        let done = converge(step.ctx, &client, &compartment, spec, &plan, change.tags, change.retag(), step.timeout, step.census).await;
        let now = observe(step.ctx, &client, &compartment, &spec.name, step.census).await;
        let state = match &now {
            Ok(live) => with_live(step.ctx, &client, &compartment, &state, live).await,
            Err(_) => state,
        };
        Outcome::of(done, state.clone(), || state)
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, _spec: Option<&SlurmSpec>) -> Outcome {
        let Some((region, compartment)) = fabric_place(prior).or_else(|| imported_place(prior)) else {
            return Outcome::failed(prior.clone(), no_fabric_id("Slurm cluster"));
        };
        let client = match api::connect(step.ctx, &region) {
            Ok(c) => c,
            Err(e) => return Outcome::failed(prior.clone(), e),
        };
        let name = prior.get("name").as_str().unwrap_or_default();
        match delete(step.ctx, &client, &compartment, name, step.timeout, step.census).await {
            Ok(()) => Outcome::done(Value::Null),
            Err(e) => Outcome::failed(prior.clone(), e),
        }
    }

    async fn read(&self, step: &Step<'_>, state: &Value, _spec: Option<&SlurmSpec>) -> Result<Option<Value>, CloudError> {
        let Some((region, compartment)) = fabric_place(state).or_else(|| imported_place(state)) else { return Ok(Some(state.clone())) };
        let client = api::connect(step.ctx, &region)?;
        let live = observe(step.ctx, &client, &compartment, state.get("name").as_str().unwrap_or_default(), step.census).await?;
        if live.is_empty() {
            return Ok(None);
        }
        Ok(Some(with_live(step.ctx, &client, &compartment, state, &live).await))
    }

    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError> {
        let Some((region, compartment, name)) = api::parse_id(id) else {
            return Err(ImportError::BadId(format!(
                "{id:?} is not an OCI Slurm cluster id: give \"oci/<region>/<compartment OCID>/<Slurm cluster name>\", e.g. \
                 \"oci/us-ashburn-1/ocid1.compartment.oc1..aaaa/ml\"."
            )));
        };
        let client = api::connect(step.ctx, region).map_err(ImportError::failed)?;
        let live = observe(step.ctx, &client, compartment, name, step.census).await.map_err(ImportError::failed)?;
        let hosts: Vec<shared::SlurmHostFound> = live
            .hosts
            .iter()
            .map(|(host, i)| shared::SlurmHostFound {
                host: host.clone(),
                instance_type: i["shape"].as_str().unwrap_or_default().to_owned(),
                tags: tags_of(i),
                ssh_public_key: i["metadata"]["ssh_authorized_keys"].as_str().map(str::to_owned),
            })
            .collect();
        let payload = live
            .hosts
            .get(&crate::nodes::controller_name(name, 0))
            .and_then(|i| i["metadata"][channel::OCI_KEY].as_str().map(str::to_owned));
        shared::slurm_imported(crate::catalog::Cloud::Oci, id, region, name, &hosts, payload.as_deref(), step.default_tags)
    }
}
