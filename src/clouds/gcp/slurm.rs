//! `hpc_slurm_cluster` on Google Cloud: a subnetwork of its own in the fabric's host network (that network's
//! last /28), a firewall rule letting the fabric's network reach in (the controllers and the nodes talk
//! both ways), the controllers at their fixed addresses and the login nodes, set up by their first boot
//! (`clouds::slurm::setup_script`, as `user-data`), their Slurm configuration in their metadata
//! (`hpc-slurm-config`, rewritten with setMetadata when it changes). The instances carry the labels `hpc_slurm` and
//! `hpc_owner`; the subnetwork and the firewall rule say whose they are in their description
//! (`hpc-provider slurm=<name> owner=<marker>`). Only the census's pieces are changed or deleted.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use google_cloud_compute_v1::model;
use serde_json::json;

use super::api::{self, Gcp, call};
use super::backend;
use super::fabric::parse_description;
use crate::clouds::backend::{Backend, Change, ImportError, Imported, Outcome, Step};
use crate::clouds::error::CloudError;
use crate::clouds::retry;
use crate::clouds::shared;
use crate::clouds::slurm::{Role, channel, setup_script, slurm_config};
use crate::framework::{Context, Value};
use crate::model::SlurmPlan;
use crate::model::SlurmSpec;
use crate::ownership::Census;

/// What exists of a Slurm cluster.
#[derive(Debug, Default)]
struct SlurmLive {
    subnetwork: bool,
    firewall: bool,
    hosts: BTreeMap<String, model::Instance>,
}

impl SlurmLive {
    fn is_empty(&self) -> bool {
        !self.subnetwork && !self.firewall && self.hosts.is_empty()
    }
}

fn description(name: &str, owner: Option<&str>) -> String {
    match owner {
        Some(o) => format!("hpc-provider slurm={name} owner={o}"),
        None => format!("hpc-provider slurm={name}"),
    }
}

/// Whether a subnetwork or firewall rule described as `desc` is this cluster's, as the census admits it.
fn admitted(census: &Census, kind: &str, name: &str, piece: &str, desc: Option<&str>, created: Option<&str>) -> bool {
    let described = desc.and_then(parse_description);
    let ours = described.as_ref().is_some_and(|d| d.get("slurm").map(String::as_str) == Some(name));
    ours && census.admit(kind, piece, described.as_ref().and_then(|d| d.get("owner")).map(String::as_str), created)
}

async fn observe(ctx: &Context, gcp: &Gcp, spec_zone: &str, region: &str, name: &str, census: &Census) -> Result<SlurmLive, CloudError> {
    let p = &gcp.project;
    let piece = format!("{name}-control");
    let mut live = SlurmLive::default();
    match call(ctx, "reading the Slurm subnetwork", || {
        gcp.subnetworks.get().set_project(p).set_region(region).set_subnetwork(&piece).send()
    })
    .await
    {
        Ok(s) => {
            live.subnetwork =
                admitted(census, "google_compute_subnetwork", name, &piece, s.description.as_deref(), s.creation_timestamp.as_deref())
        }
        Err(e) if e.is_not_found() => {}
        Err(e) => return Err(e),
    }
    match call(ctx, "reading the Slurm firewall rule", || gcp.firewalls.get().set_project(p).set_firewall(&piece).send()).await {
        Ok(f) => {
            live.firewall =
                admitted(census, "google_compute_firewall", name, &piece, f.description.as_deref(), f.creation_timestamp.as_deref())
        }
        Err(e) if e.is_not_found() => {}
        Err(e) => return Err(e),
    }
    let filter = format!("labels.hpc_slurm = \"{name}\"");
    let page = call(ctx, "listing the Slurm cluster's instances", || {
        gcp.instances.list().set_project(p).set_zone(spec_zone).set_filter(&filter).send()
    })
    .await?;
    for i in page.items {
        let host = i.name.clone().unwrap_or_default();
        let marker = i.labels.get("hpc_owner").map(String::as_str);
        let gone = i.status.as_ref().and_then(|s| s.name()).is_some_and(|s| s == "TERMINATED" || s == "STOPPING");
        if !gone && census.admit("google_compute_instance", &host, marker, i.creation_timestamp.as_deref()) {
            live.hosts.insert(host, i);
        }
    }
    Ok(live)
}

#[allow(clippy::too_many_arguments)]
async fn converge(
    ctx: &Context,
    gcp: &Gcp,
    spec: &SlurmSpec,
    plan: &SlurmPlan,
    tags: &BTreeMap<String, String>,
    retag: bool,
    timeout: Duration,
    census: &Census,
) -> Result<(), CloudError> {
    let (p, region) = (&gcp.project, &spec.fabric.region);
    let zone = spec.fabric.zone.clone().unwrap_or_default();
    let live = observe(ctx, gcp, &zone, region, &spec.name, census).await?;
    census.gate()?;
    let piece = format!("{}-control", spec.name);
    let network = format!("projects/{p}/global/networks/{}-vpc", spec.fabric.name);
    let desc = description(&spec.name, census.marker());
    if !live.subnetwork {
        let what = format!("creating subnetwork {piece}");
        let body: model::Subnetwork = serde_json::from_value(json!({
            "name": piece, "network": network, "ipCidrRange": plan.control_subnet, "description": desc,
            "privateIpGoogleAccess": true,
        }))
        .map_err(|e| CloudError::other(format!("{what}: {e}")))?;
        let rid = api::request_id();
        let op = call(ctx, &what, || {
            gcp.subnetworks.insert().set_project(p).set_region(region).set_request_id(&rid).set_body(body.clone()).send()
        })
        .await?;
        api::wait(ctx, gcp, op, &what, timeout).await?;
    }
    if !live.firewall {
        let what = format!("creating firewall rule {piece}");
        let body: model::Firewall = serde_json::from_value(json!({
            "name": piece, "network": network, "direction": "INGRESS", "sourceRanges": [spec.cidr],
            "allowed": [{"IPProtocol": "all"}], "description": desc,
        }))
        .map_err(|e| CloudError::other(format!("{what}: {e}")))?;
        let rid = api::request_id();
        let op = call(ctx, &what, || gcp.firewalls.insert().set_project(p).set_request_id(&rid).set_body(body.clone()).send()).await?;
        api::wait(ctx, gcp, op, &what, timeout).await?;
    }
    let config = slurm_config(plan, spec.key.as_ref().map(|k| k.expose_str()));
    // The instances that exist and carry another configuration: setMetadata (under the metadata's fingerprint,
    // every other item kept; on 412 conditionNotMet read again) with the new one, which their sync program
    // reads from the metadata server.
    let carries = |i: &model::Instance| {
        let items = i.metadata.as_ref().map(|m| m.items.as_slice()).unwrap_or_default();
        items.iter().any(|m| m.key.as_deref() == Some(channel::GCP_REVISION_KEY) && m.value.as_deref() == Some(config.revision.as_str()))
    };
    for (host, instance) in live.hosts.iter().filter(|(_, i)| !carries(i)) {
        let what = format!("writing Slurm configuration {} to {host}", config.revision);
        let what = what.as_str();
        let read = || call(ctx, what, || gcp.instances.get().set_project(p).set_zone(&zone).set_instance(host).send());
        let zone = &zone;
        let op = retry::guarded(
            instance.clone(),
            |now| {
                let current = now.metadata.clone().unwrap_or_default();
                let mut items: Vec<model::metadata::Items> = current
                    .items
                    .iter()
                    .filter(|m| !matches!(m.key.as_deref(), Some(channel::GCP_KEY | channel::GCP_REVISION_KEY)))
                    .cloned()
                    .collect();
                items.push(model::metadata::Items::new().set_key(channel::GCP_KEY).set_value(&config.payload));
                items.push(model::metadata::Items::new().set_key(channel::GCP_REVISION_KEY).set_value(&config.revision));
                let mut body = model::Metadata::new().set_items(items);
                if let Some(f) = current.fingerprint.clone() {
                    body = body.set_fingerprint(f);
                }
                call(ctx, what, move || {
                    gcp.instances.set_metadata().set_project(p).set_zone(zone).set_instance(host).set_body(body.clone()).send()
                })
            },
            read,
        )
        .await?;
        api::wait(ctx, gcp, op, what, timeout).await?;
    }
    let labels = api::labels(tags);
    // Changed tags: the instances' labels (setLabels under their fingerprint; the subnetwork and firewall rule
    // have none).
    if retag {
        for (host, instance) in &live.hosts {
            let what = format!("labelling instance {host}");
            let what = what.as_str();
            let read = || call(ctx, what, || gcp.instances.get().set_project(p).set_zone(&zone).set_instance(host).send());
            let (zone, labels) = (&zone, &labels);
            let op = retry::guarded(
                instance.clone(),
                |now| {
                    let mut body = model::InstancesSetLabelsRequest::new().set_labels(labels.clone());
                    if let Some(f) = now.label_fingerprint.clone() {
                        body = body.set_label_fingerprint(f);
                    }
                    call(ctx, what, move || {
                        gcp.instances.set_labels().set_project(p).set_zone(zone).set_instance(host).set_body(body.clone()).send()
                    })
                },
                read,
            )
            .await?;
            api::wait(ctx, gcp, op, what, timeout).await?;
        }
    }
    let image = spec.image.clone().unwrap_or_else(|| super::cluster::DEFAULT_IMAGE.to_owned());
    let mut wanted: Vec<(String, Role, Option<String>, &str)> =
        plan.controllers.iter().map(|(h, a)| (h.clone(), Role::Controller, Some(a.clone()), spec.controller_type.as_str())).collect();
    wanted.extend(plan.logins.iter().map(|h| (h.clone(), Role::Login, None, spec.login_type.as_str())));
    for (host, role, address, machine) in wanted {
        if live.hosts.contains_key(&host) {
            continue;
        }
        let what = format!("creating instance {host}");
        let mut metadata = vec![
            json!({"key": "user-data", "value": setup_script(spec, role, &host, spec.key.as_ref().map(|k| k.expose_str()))}),
            json!({"key": channel::GCP_KEY, "value": config.payload}),
            json!({"key": channel::GCP_REVISION_KEY, "value": config.revision}),
        ];
        if let Some(k) = &spec.ssh_public_key {
            metadata.push(json!({"key": "ssh-keys", "value": format!("hpc:{}", k.trim())}));
        }
        let mut nic = json!({"subnetwork": format!("projects/{p}/regions/{region}/subnetworks/{piece}")});
        if let Some(a) = &address {
            nic["networkIP"] = json!(a);
        }
        let body: model::Instance = serde_json::from_value(json!({
            "name": host,
            "machineType": format!("zones/{zone}/machineTypes/{machine}"),
            "labels": labels,
            "networkInterfaces": [nic],
            "disks": [{"boot": true, "autoDelete": true, "initializeParams": {"sourceImage": image, "diskSizeGb": "100"}}],
            "metadata": {"items": metadata},
        }))
        .map_err(|e| CloudError::other(format!("{what}: {e}")))?;
        let rid = api::request_id();
        let op =
            call(ctx, &what, || gcp.instances.insert().set_project(p).set_zone(&zone).set_request_id(&rid).set_body(body.clone()).send())
                .await?;
        api::wait(ctx, gcp, op, &what, timeout).await?;
    }
    Ok(())
}

async fn delete(ctx: &Context, gcp: &Gcp, state: &Value, timeout: Duration, census: &Census) -> Result<(), CloudError> {
    let (p, name) = (&gcp.project, state.get("name").as_str().unwrap_or_default());
    let (zone, region) = place_of(state);
    let (zone, region) = (zone.as_str(), region.as_str());
    let live = observe(ctx, gcp, zone, region, name, census).await?;
    for host in live.hosts.keys() {
        let what = format!("deleting instance {host}");
        match call(ctx, &what, || gcp.instances.delete().set_project(p).set_zone(zone).set_instance(host).send()).await {
            Ok(op) => api::wait(ctx, gcp, op, &what, timeout).await?,
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    let piece = format!("{name}-control");
    if live.firewall {
        let what = format!("deleting firewall rule {piece}");
        let op = call(ctx, &what, || gcp.firewalls.delete().set_project(p).set_firewall(&piece).send()).await?;
        api::wait(ctx, gcp, op, &what, timeout).await?;
    }
    if live.subnetwork {
        let what = format!("deleting subnetwork {piece}");
        let op = call(ctx, &what, || gcp.subnetworks.delete().set_project(p).set_region(region).set_subnetwork(&piece).send()).await?;
        api::wait(ctx, gcp, op, &what, timeout).await?;
    }
    Ok(())
}

/// A Slurm cluster's zone and region: its fabric's, or an imported one's (whose fabric the first plan fills)
/// from its id.
fn place_of(state: &Value) -> (String, String) {
    let fabric = state.get("fabric");
    match (fabric.get("zone").as_str(), fabric.get("region").as_str()) {
        (Some(z), Some(r)) => (z.to_owned(), r.to_owned()),
        _ => {
            let zone = state.get("id").as_str().and_then(api::parse_id).map_or("", |(z, _)| z);
            (zone.to_owned(), zone.rsplit_once('-').map_or(zone, |(r, _)| r).to_owned())
        }
    }
}

fn with_live(state: &Value, live: &SlurmLive) -> Value {
    let address = |host: &str| live.hosts.get(host).and_then(|i| i.network_interfaces.first()).and_then(|n| n.network_ip.clone());
    let exists = |kind: &str, piece: &str| match kind {
        "google_compute_subnetwork" => live.subnetwork,
        "google_compute_firewall" => live.firewall,
        _ => live.hosts.contains_key(piece),
    };
    let revision = |host: &str| {
        live.hosts.get(host).map(|i| {
            let items = i.metadata.as_ref().map(|m| m.items.as_slice()).unwrap_or_default();
            items.iter().find(|m| m.key.as_deref() == Some(channel::GCP_REVISION_KEY)).and_then(|m| m.value.clone())
        })
    };
    // OS Login or the key's own user: the key is installed for `hpc`.
    shared::slurm_state(state, "hpc", exists, shared::SlurmHostsLive { address: &address, revision: &revision })
}

#[async_trait]
impl Backend<SlurmSpec> for backend::Gcp {
    async fn configured(&self, ctx: &Context) -> Result<(), CloudError> {
        api::connect(ctx).await.map(|_| ())
    }

    fn id(&self, spec: &SlurmSpec) -> Option<String> {
        // Its zone, as a cluster's: what an import takes.
        Some(api::resource_id(spec.fabric.zone.as_deref().unwrap_or(&spec.fabric.region), &spec.name))
    }

    fn place(&self, v: &Value) -> String {
        format!("in {}", v.get("fabric").get("zone").as_str().unwrap_or_default())
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, SlurmSpec>) -> Outcome {
        let gcp = match api::connect(step.ctx).await {
            Ok(g) => g,
            Err(e) => return Outcome::failed(change.prior.clone(), e),
        };
        let spec = change.spec;
        let Some(plan) = SlurmPlan::from_state(change.planned) else {
            return Outcome::failed(change.prior.clone(), CloudError::other("the plan does not say the Slurm configuration"));
        };
        let done = converge(step.ctx, &gcp, spec, &plan, change.tags, change.retag(), step.timeout, step.census).await;
        let zone = spec.fabric.zone.clone().unwrap_or_default();
        let state = match observe(step.ctx, &gcp, &zone, &spec.fabric.region, &spec.name, step.census).await {
            Ok(live) => with_live(change.state, &live),
            Err(_) => change.state.clone(),
        };
        Outcome::of(done, state.clone(), || state)
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, _spec: Option<&SlurmSpec>) -> Outcome {
        let gcp = match api::connect(step.ctx).await {
            Ok(g) => g,
            Err(e) => return Outcome::failed(prior.clone(), e),
        };
        Outcome::of(delete(step.ctx, &gcp, prior, step.timeout, step.census).await, Value::Null, || prior.clone())
    }

    async fn read(&self, step: &Step<'_>, state: &Value, _spec: Option<&SlurmSpec>) -> Result<Option<Value>, CloudError> {
        let gcp = api::connect(step.ctx).await?;
        let (zone, region) = place_of(state);
        let live = observe(step.ctx, &gcp, &zone, &region, state.get("name").as_str().unwrap_or_default(), step.census).await?;
        Ok((!live.is_empty()).then(|| with_live(state, &live)))
    }

    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError> {
        let Some((zone, name)) = api::parse_id(id).filter(|(z, _)| z.matches('-').count() == 2) else {
            return Err(ImportError::BadId(format!(
                "{id:?} is not a Google Cloud Slurm cluster id: give \"gcp/<zone>/<Slurm cluster name>\", e.g. \"gcp/us-central1-a/ml\"."
            )));
        };
        let gcp = api::connect(step.ctx).await.map_err(ImportError::failed)?;
        let region = zone.rsplit_once('-').map_or(zone, |(r, _)| r);
        let live = observe(step.ctx, &gcp, zone, region, name, step.census).await.map_err(ImportError::failed)?;
        let item = |i: &model::Instance, key: &str| {
            i.metadata.as_ref().and_then(|m| m.items.iter().find(|x| x.key.as_deref() == Some(key))).and_then(|x| x.value.clone())
        };
        let hosts: Vec<shared::SlurmHostFound> = live
            .hosts
            .iter()
            .map(|(host, i)| shared::SlurmHostFound {
                host: host.clone(),
                instance_type: i.machine_type.as_deref().and_then(|m| m.rsplit('/').next()).unwrap_or_default().to_owned(),
                // Labels as tags: the provider's own keys come back with their colon.
                tags: i.labels.iter().map(|(k, v)| (k.replacen("hpc_", "hpc:", 1), v.clone())).collect(),
                // `ssh-keys` is `hpc:<key>`, as the create writes it.
                ssh_public_key: item(i, "ssh-keys").and_then(|k| k.strip_prefix("hpc:").map(str::to_owned)),
            })
            .collect();
        let payload = live.hosts.get(&crate::nodes::controller_name(name, 0)).and_then(|i| item(i, channel::GCP_KEY));
        shared::slurm_imported(crate::catalog::Cloud::Gcp, id, region, name, &hosts, payload.as_deref(), step.default_tags)
    }
}
