//! `hpc_gpu_fabric` on OCI: VCN and subnet (unless given), a network security group whose rules let its
//! members talk to each other (RDMA and NCCL bootstrap), and the compute cluster that places bare-metal GPU
//! nodes on one RDMA network block (placement `cluster`). With placement `cluster-network` the cluster
//! builds its own cluster network, whose placement configuration names this fabric's availability domain
//! and subnet. Pieces are found by display name in the compartment; the security group's freeform tags
//! record the fabric's configuration for imports. A refresh is one list call per kind. Only pieces the
//! census admits (their `hpc:owner` freeform tag) are used, changed or deleted.
//! The lifecycle's backend for this kind, `Backend<FabricSpec>` on `backend::Oci`, comes last, before the tests.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value as Json, json};

use super::api;
use super::api::{Oci, Service, encode, is_gone, tags_of};
use super::backend::{self, configured, import_id, summary};
use super::fabric;
use crate::clouds::backend::{Backend, Change, ImportError, Imported, Outcome, Step};
use crate::clouds::error::CloudError;
use crate::clouds::shared;
use crate::framework::{Context, Value};
use crate::model::{FabricSpec, Network, Placement};
use crate::ownership::Census;

/// What exists of a fabric, by piece.
#[derive(Debug, Default)]
pub struct FabricLive {
    pub vcn: Option<Json>,
    pub subnet: Option<Json>,
    pub nsg: Option<Json>,
    /// Directions (INGRESS, EGRESS) of the security group's rules.
    pub rules: Vec<String>,
    pub compute_cluster: Option<Json>,
}

impl FabricLive {
    pub fn is_empty(&self) -> bool {
        self.vcn.is_none() && self.nsg.is_none() && self.compute_cluster.is_none()
    }
}

fn id(v: &Option<Json>) -> Option<String> {
    v.as_ref().and_then(|j| j["id"].as_str()).map(str::to_owned)
}

/// The first live item of a list filtered by display name that the census admits (pieces of another
/// owner are recorded); `kind` names it in the official provider's words.
pub async fn find(
    oci: &Oci,
    ctx: &Context,
    collection: &str,
    query: String,
    kind: &str,
    census: &Census,
) -> Result<Option<Json>, CloudError> {
    let items = oci.list(ctx, Service::Core, collection, &query).await?;
    Ok(items.into_iter().filter(|i| !is_gone(i)).find(|i| {
        let name = i["displayName"].as_str().unwrap_or_default();
        census.admit(kind, name, crate::ownership::marker_in(&tags_of(i)), i["timeCreated"].as_str())
    }))
}

/// The fabric's security group, found by name in the compartment.
pub async fn find_nsg(ctx: &Context, oci: &Oci, compartment: &str, fabric: &str, census: &Census) -> Result<Option<Json>, CloudError> {
    let q = format!("compartmentId={}&displayName={}", encode(compartment), encode(&format!("{fabric}-nsg")));
    find(oci, ctx, "networkSecurityGroups", q, "oci_core_network_security_group", census).await
}

pub async fn observe(ctx: &Context, oci: &Oci, spec: &FabricSpec, compartment: &str, census: &Census) -> Result<FabricLive, CloudError> {
    let n = &spec.name;
    let c = encode(compartment);
    let mut live = FabricLive::default();
    match &spec.network {
        Network::Create { .. } => {
            let q = format!("compartmentId={c}&displayName={}", encode(&format!("{n}-vpc")));
            live.vcn = find(oci, ctx, "vcns", q, "oci_core_vcn", census).await?;
            if let Some(vcn) = id(&live.vcn) {
                let q = format!("compartmentId={c}&vcnId={}&displayName={}", encode(&vcn), encode(&format!("{n}-subnet")));
                live.subnet = find(oci, ctx, "subnets", q, "oci_core_subnet", census).await?;
            }
        }
        Network::Existing { .. } => {}
    }
    live.nsg = find_nsg(ctx, oci, compartment, n, census).await?;
    if let Some(nsg) = id(&live.nsg) {
        // A group can hold more rules than one page.
        let rules = oci.list(ctx, Service::Core, &format!("networkSecurityGroups/{nsg}/securityRules"), "").await?;
        live.rules = rules.iter().filter_map(|r| r["direction"].as_str().map(str::to_owned)).collect();
    }
    if spec.placement == Placement::Cluster {
        let ad = encode(spec.zone.as_deref().unwrap_or_default());
        let q = format!("compartmentId={c}&availabilityDomain={ad}&displayName={}", encode(&format!("{n}-cc")));
        live.compute_cluster = find(oci, ctx, "computeClusters", q, "oci_core_compute_cluster", census).await?;
    }
    Ok(live)
}

/// The security group's tags: the user's, ours, and what an import needs.
pub fn nsg_tags(spec: &FabricSpec, gpu: Option<&str>, tags: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    crate::clouds::recorded_config(spec, gpu, tags, ("hpc:vcn", "hpc:subnet"))
}

/// The VCN and subnet a fabric ends up with.
pub struct Converged {
    pub vcn: String,
    pub subnet: String,
}

/// Creates what is missing and brings tags up to date. Each piece is looked up first, so a failed apply
/// resumes where it stopped and nothing is created twice.
#[allow(clippy::too_many_arguments)]
pub async fn converge(
    ctx: &Context,
    oci: &Oci,
    spec: &FabricSpec,
    compartment: &str,
    gpu: Option<&str>,
    tags: &BTreeMap<String, String>,
    timeout: Duration,
    census: &Census,
) -> Result<Converged, CloudError> {
    let n = &spec.name;
    let live = observe(ctx, oci, spec, compartment, census).await?;
    census.gate()?;
    let (vcn, subnet) = match &spec.network {
        Network::Existing { vpc_id, subnet_id } => {
            let found = oci.get(ctx, Service::Core, &format!("/subnets/{subnet_id}")).await?;
            match found {
                Some(s) if s["vcnId"].as_str() == Some(vpc_id.as_str()) => {}
                Some(s) => {
                    return Err(format!(
                        "subnet {subnet_id} (subnet_id) belongs to VCN {}, not to {vpc_id} (vpc_id)",
                        s["vcnId"].as_str().unwrap_or("?")
                    )
                    .into());
                }
                None => return Err(format!("subnet {subnet_id} (subnet_id) does not exist or is not visible to this user").into()),
            }
            (vpc_id.clone(), subnet_id.clone())
        }
        Network::Create { cidr } => {
            let vcn = match &live.vcn {
                Some(v) => {
                    retag(ctx, oci, "vcns", v, tags).await?;
                    v["id"].as_str().unwrap_or_default().to_owned()
                }
                None => {
                    let body = json!({"compartmentId": compartment, "displayName": format!("{n}-vpc"), "cidrBlocks": [cidr],
                                      "dnsLabel": dns_label(n), "freeformTags": tags});
                    let (v, _) = oci.create(ctx, Service::Core, "vcns", &body, &format!("VCN {n}-vpc")).await?;
                    let id = v["id"].as_str().unwrap_or_default().to_owned();
                    oci.wait_state(
                        ctx,
                        Service::Core,
                        &format!("/vcns/{id}"),
                        &["AVAILABLE"],
                        &["TERMINATED"],
                        &format!("creating VCN {n}-vpc"),
                        timeout,
                    )
                    .await?;
                    id
                }
            };
            let subnet = match &live.subnet {
                Some(s) => {
                    retag(ctx, oci, "subnets", s, tags).await?;
                    s["id"].as_str().unwrap_or_default().to_owned()
                }
                None => {
                    let body = json!({"compartmentId": compartment, "vcnId": vcn, "displayName": format!("{n}-subnet"),
                                      "cidrBlock": crate::clouds::first_subnet(cidr), "prohibitPublicIpOnVnic": true, "freeformTags": tags});
                    let (s, _) = oci.create(ctx, Service::Core, "subnets", &body, &format!("subnet {n}-subnet")).await?;
                    let id = s["id"].as_str().unwrap_or_default().to_owned();
                    oci.wait_state(
                        ctx,
                        Service::Core,
                        &format!("/subnets/{id}"),
                        &["AVAILABLE"],
                        &["TERMINATED"],
                        &format!("creating subnet {n}-subnet"),
                        timeout,
                    )
                    .await?;
                    id
                }
            };
            (vcn, subnet)
        }
    };
    let nsg_tags = nsg_tags(spec, gpu, tags);
    let (nsg, available) = match &live.nsg {
        Some(g) => {
            retag(ctx, oci, "networkSecurityGroups", g, &nsg_tags).await?;
            (g["id"].as_str().unwrap_or_default().to_owned(), g["lifecycleState"].as_str() == Some("AVAILABLE"))
        }
        None => {
            let body = json!({"compartmentId": compartment, "vcnId": vcn, "displayName": format!("{n}-nsg"), "freeformTags": nsg_tags});
            let (g, _) = oci.create(ctx, Service::Core, "networkSecurityGroups", &body, &format!("network security group {n}-nsg")).await?;
            (g["id"].as_str().unwrap_or_default().to_owned(), false)
        }
    };
    // Rules go in once the group is AVAILABLE (OCI refuses them while it is PROVISIONING).
    if !available {
        oci.wait_state(
            ctx,
            Service::Core,
            &format!("/networkSecurityGroups/{nsg}"),
            &["AVAILABLE"],
            &["TERMINATING", "TERMINATED"],
            &format!("creating network security group {n}-nsg"),
            timeout,
        )
        .await?;
    }
    let purpose = format!("{n}: nodes of the fabric reach each other (RDMA, NCCL bootstrap)");
    let mut rules = Vec::new();
    if !live.rules.iter().any(|d| d == "INGRESS") {
        rules.push(json!({"direction": "INGRESS", "protocol": "all", "source": nsg, "sourceType": "NETWORK_SECURITY_GROUP", "description": purpose}));
    }
    if !live.rules.iter().any(|d| d == "EGRESS") {
        rules.push(json!({"direction": "EGRESS", "protocol": "all", "destination": nsg, "destinationType": "NETWORK_SECURITY_GROUP",
                          "description": purpose}));
    }
    if !rules.is_empty() {
        let path = format!("/networkSecurityGroups/{nsg}/actions/addSecurityRules");
        oci.action(ctx, Service::Core, &path, Some(&json!({"securityRules": rules})), "adding the security rules").await?;
    }
    if spec.placement == Placement::Cluster {
        match &live.compute_cluster {
            Some(cc) => retag(ctx, oci, "computeClusters", cc, tags).await?,
            None => {
                let body = json!({"compartmentId": compartment, "availabilityDomain": spec.zone, "displayName": format!("{n}-cc"),
                                  "freeformTags": tags});
                oci.create(ctx, Service::Core, "computeClusters", &body, &format!("compute cluster {n}-cc")).await?;
            }
        }
    }
    Ok(Converged { vcn, subnet })
}

/// A VCN DNS label: letters and digits, starting with a letter, at most 15.
fn dns_label(name: &str) -> String {
    let mut s: String = name.chars().filter(char::is_ascii_alphanumeric).take(15).collect();
    if !s.starts_with(|c: char| c.is_ascii_alphabetic()) {
        s = format!("f{}", &s[..s.len().min(14)]);
    }
    s
}

/// Brings a piece's freeform tags to `tags` when they differ (read with its etag, one PUT with `if-match`;
/// nothing when equal).
pub async fn retag(ctx: &Context, oci: &Oci, collection: &str, item: &Json, tags: &BTreeMap<String, String>) -> Result<(), CloudError> {
    let retagged = |item: &Json| (&tags_of(item) != tags).then(|| json!({"freeformTags": tags}));
    if retagged(item).is_none() {
        return Ok(());
    }
    let id = item["id"].as_str().unwrap_or_default();
    let what = format!("{} {}", collection.trim_end_matches('s'), item["displayName"].as_str().unwrap_or(id));
    oci.rewrite(ctx, Service::Core, &format!("/{collection}/{id}"), &what, retagged).await.map(|_| ())
}

/// Deletes the fabric's pieces, dependants first; a given VCN and subnet are left as found.
pub async fn delete(
    ctx: &Context,
    oci: &Oci,
    spec: &FabricSpec,
    compartment: &str,
    timeout: Duration,
    census: &Census,
) -> Result<(), CloudError> {
    let live = observe(ctx, oci, spec, compartment, census).await?;
    let n = &spec.name;
    // A subnet that still holds running instances cannot go (OCI answers 409 for as long as they run):
    // said at once, before any piece is deleted, instead of being retried until the timeout.
    if let Some(subnet) = id(&live.subnet) {
        let held = instances_in(ctx, oci, compartment, &subnet).await?;
        if !held.is_empty() {
            return Err(held_by(&format!("{n}-subnet"), &subnet, &held));
        }
    }
    if let Some(cc) = id(&live.compute_cluster) {
        oci.delete(ctx, Service::Core, &format!("/computeClusters/{cc}"), &format!("compute cluster {n}-cc"), timeout).await?;
    }
    if let Some(nsg) = id(&live.nsg) {
        oci.delete(ctx, Service::Core, &format!("/networkSecurityGroups/{nsg}"), &format!("network security group {n}-nsg"), timeout)
            .await?;
    }
    if let Some(subnet) = id(&live.subnet) {
        oci.delete(ctx, Service::Core, &format!("/subnets/{subnet}"), &format!("subnet {n}-subnet"), timeout).await?;
    }
    if let Some(vcn) = id(&live.vcn) {
        oci.delete(ctx, Service::Core, &format!("/vcns/{vcn}"), &format!("VCN {n}-vpc"), timeout).await?;
    }
    Ok(())
}

/// How many of the instances that hold a subnet its error names; the rest are counted.
const NAMED: usize = 3;

/// The instances (display name, OCID) whose VNIC is attached in `subnet` and that are not terminating or
/// terminated, whoever owns them: one listing of the compartment's VNIC attachments (VnicAttachment names
/// its subnet) and, only when some are attached there, one listing of its instances for their names and
/// states; two list calls at most, whatever the number of instances. An instance already terminating is not
/// one: its VNIC goes with it, and the subnet's 409 meanwhile is waited out by the delete. Instances of
/// another compartment in the subnet are not seen here; their 409 is waited out until the timeout, as before.
pub async fn instances_in(ctx: &Context, oci: &Oci, compartment: &str, subnet: &str) -> Result<Vec<(String, String)>, CloudError> {
    let c = encode(compartment);
    let attached: std::collections::BTreeSet<String> = oci
        .list(ctx, Service::Core, "vnicAttachments", &format!("compartmentId={c}"))
        .await?
        .into_iter()
        .filter(|a| a["subnetId"].as_str() == Some(subnet) && !matches!(a["lifecycleState"].as_str(), Some("DETACHING" | "DETACHED")))
        .filter_map(|a| a["instanceId"].as_str().map(str::to_owned))
        .collect();
    if attached.is_empty() {
        return Ok(Vec::new());
    }
    let instances: BTreeMap<String, Json> = oci
        .list(ctx, Service::Core, "instances", &format!("compartmentId={c}"))
        .await?
        .into_iter()
        .filter_map(|i| Some((i["id"].as_str()?.to_owned(), i)))
        .collect();
    let mut held: Vec<(String, String)> = attached
        .into_iter()
        .filter_map(|id| match instances.get(&id) {
            Some(i) if matches!(i["lifecycleState"].as_str(), Some("TERMINATING" | "TERMINATED")) => None,
            Some(i) => Some((i["displayName"].as_str().unwrap_or_default().to_owned(), id)),
            // Attached but not listed yet (launched a moment ago): it holds the subnet all the same.
            None => Some((String::new(), id)),
        })
        .collect();
    held.sort();
    Ok(held)
}

/// The error of a subnet `held` instances keep from being deleted: the first [`NAMED`] of them by name and
/// OCID, then how many more.
fn held_by(name: &str, subnet: &str, held: &[(String, String)]) -> CloudError {
    let shown: Vec<String> = held.iter().take(NAMED).map(|(n, id)| if n.is_empty() { id.clone() } else { format!("{n} ({id})") }).collect();
    let mut list = shown.join(", ");
    if held.len() > NAMED {
        list = format!("{list} and {} more", held.len() - NAMED);
    }
    CloudError::new(
        crate::clouds::ErrorKind::Conflict,
        None,
        format!(
            "subnet {name} ({subnet}) still holds {} instance{} that {} not terminating: {list}. OCI deletes no subnet with VNICs in it \
             (409 Conflict); nothing of the fabric was deleted. Terminate them, or destroy the clusters that run them, and destroy again",
            held.len(),
            if held.len() == 1 { "" } else { "s" },
            if held.len() == 1 { "is" } else { "are" },
        ),
    )
}

/// Which planned pieces exist, by kind, for the refreshed expansion.
pub fn present(live: &FabricLive) -> impl Fn(&str) -> bool {
    let (vcn, subnet, nsg, rules, cc) =
        (live.vcn.is_some(), live.subnet.is_some(), live.nsg.is_some(), live.rules.len() >= 2, live.compute_cluster.is_some());
    move |kind: &str| match kind {
        "oci_core_vcn" => vcn,
        "oci_core_subnet" => subnet,
        "oci_core_network_security_group" => nsg,
        "oci_core_network_security_group_security_rule" => rules,
        "oci_core_compute_cluster" => cc,
        _ => true,
    }
}

/// The configuration an import rebuilds from the security group's tags.
pub fn imported_config(
    region: &str,
    compartment: &str,
    name: &str,
    nsg: &Json,
    defaults: &BTreeMap<String, String>,
) -> Result<Value, CloudError> {
    let tags = tags_of(nsg);
    let location = [("compartment_id", Value::from(compartment))];
    crate::clouds::config_from_record(crate::catalog::Cloud::Oci, name, region, &tags, ("hpc:vcn", "hpc:subnet"), &location, defaults)
        .map_err(CloudError::from)
}

/// The fabric as the `fabric = hpc_gpu_fabric.x` object, from its security group.
pub async fn fabric_ref(ctx: &Context, oci: &Oci, compartment: &str, fabric: &str) -> Result<(Value, Json), CloudError> {
    let nsg = find_nsg(ctx, oci, compartment, fabric, &Census::reading())
        .await?
        .ok_or_else(|| CloudError::other(format!("the fabric {fabric} no longer exists in the compartment")))?;
    let tags = tags_of(&nsg);
    let tag = |k: &str| tags.get(k).map_or(Value::Null, |v| Value::from(v.as_str()));
    let reference = Value::object([
        ("id", Value::from(super::api::resource_id(&oci.region, compartment, fabric))),
        ("cloud", Value::from("oci")),
        ("region", Value::from(oci.region.as_str())),
        ("zone", tag("hpc:zone")),
        ("name", Value::from(fabric)),
        ("instance_type", tag("hpc:instance-type")),
        ("placement", tag("hpc:placement")),
    ]);
    Ok((reference, nsg))
}

/// The fabric's subnet and security group, as its cluster and filesystem join them.
pub struct Joined {
    pub subnet: String,
    pub nsg: String,
    pub compute_cluster: Option<String>,
}

pub async fn join(
    ctx: &Context,
    oci: &Oci,
    compartment: &str,
    fabric: &str,
    zone: &str,
    cluster_placement: bool,
) -> Result<Joined, CloudError> {
    // Another resource's pieces, read to join them, never changed.
    let reading = Census::reading();
    let nsg = find_nsg(ctx, oci, compartment, fabric, &reading)
        .await?
        .ok_or_else(|| CloudError::other(format!("fabric {fabric} has no security group {fabric}-nsg: apply the fabric first")))?;
    let tags = tags_of(&nsg);
    let subnet = match tags.get("hpc:subnet") {
        Some(s) => s.clone(),
        None => {
            let vcn = nsg["vcnId"].as_str().unwrap_or_default();
            let q =
                format!("compartmentId={}&vcnId={}&displayName={}", encode(compartment), encode(vcn), encode(&format!("{fabric}-subnet")));
            let found = find(oci, ctx, "subnets", q, "oci_core_subnet", &reading)
                .await?
                .ok_or_else(|| CloudError::other(format!("fabric {fabric} has no subnet {fabric}-subnet: apply the fabric again")))?;
            found["id"].as_str().unwrap_or_default().to_owned()
        }
    };
    let compute_cluster = if cluster_placement {
        let q = format!(
            "compartmentId={}&availabilityDomain={}&displayName={}",
            encode(compartment),
            encode(zone),
            encode(&format!("{fabric}-cc"))
        );
        let cc = find(oci, ctx, "computeClusters", q, "oci_core_compute_cluster", &reading)
            .await?
            .ok_or_else(|| CloudError::other(format!("fabric {fabric} has no compute cluster {fabric}-cc: apply the fabric again")))?;
        Some(cc["id"].as_str().unwrap_or_default().to_owned())
    } else {
        None
    };
    Ok(Joined { subnet, nsg: nsg["id"].as_str().unwrap_or_default().to_owned(), compute_cluster })
}

fn compartment_of(spec: &FabricSpec) -> &str {
    spec.compartment_id.as_deref().unwrap_or_default()
}

#[async_trait]
impl Backend<FabricSpec> for backend::Oci {
    async fn configured(&self, ctx: &Context) -> Result<(), CloudError> {
        configured(ctx)
    }

    fn id(&self, spec: &FabricSpec) -> Option<String> {
        Some(api::resource_id(&spec.region, compartment_of(spec), &spec.name))
    }

    fn place(&self, v: &Value) -> String {
        format!("in {}", v.get("region").as_str().unwrap_or_default())
    }

    fn summary(&self, error: &CloudError) -> Option<&'static str> {
        summary(error)
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, FabricSpec>) -> Outcome {
        let spec = change.spec;
        let compartment = compartment_of(spec);
        let client = match api::connect(step.ctx, &spec.region) {
            Ok(c) => c,
            Err(e) => return Outcome::failed(change.prior.clone(), e),
        };
        let gpu = change.config.get("gpu").as_str();
        match fabric::converge(step.ctx, &client, spec, compartment, gpu, change.tags, step.timeout, step.census).await {
            Ok(done) => {
                let state = shared::with_attr(change.state, "vpc_id", Value::from(done.vcn));
                Outcome::done(shared::with_attr(&state, "subnet_id", Value::from(done.subnet)))
            }
            Err(e) => {
                // A create that left nothing behind leaves nothing in state either.
                if change.creating() && fabric::observe(step.ctx, &client, spec, compartment, step.census).await.is_ok_and(|l| l.is_empty())
                {
                    return Outcome::failed(Value::Null, e);
                }
                Outcome::failed(change.state.clone(), e)
            }
        }
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, spec: Option<&FabricSpec>) -> Outcome {
        let Some(spec) = spec else {
            return Outcome::failed(prior.clone(), "the state does not describe a fabric this provider can read");
        };
        let client = match api::connect(step.ctx, &spec.region) {
            Ok(c) => c,
            Err(e) => return Outcome::failed(prior.clone(), e),
        };
        let done = fabric::delete(step.ctx, &client, spec, compartment_of(spec), step.timeout, step.census).await;
        Outcome::of(done, Value::Null, || prior.clone())
    }

    async fn read(&self, step: &Step<'_>, state: &Value, spec: Option<&FabricSpec>) -> Result<Option<Value>, CloudError> {
        let Some(spec) = spec else { return Ok(Some(state.clone())) };
        let client = api::connect(step.ctx, &spec.region)?;
        let live = fabric::observe(step.ctx, &client, spec, compartment_of(spec), step.census).await?;
        if live.is_empty() {
            return Ok(None);
        }
        Ok(Some(shared::with_missing(state, fabric::present(&live))))
    }

    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError> {
        let (region, compartment, name) = import_id(id, "fabric", "train")?;
        let client = api::connect(step.ctx, region).map_err(ImportError::failed)?;
        let config = match fabric::find_nsg(step.ctx, &client, compartment, name, step.census).await {
            Ok(Some(nsg)) => fabric::imported_config(region, compartment, name, &nsg, step.default_tags),
            Ok(None) => Err(format!("no fabric named {name:?} in the compartment: no network security group {name}-nsg").into()),
            Err(e) => Err(e),
        }
        .map_err(ImportError::failed)?;
        let assigned = BTreeMap::from([("id".to_owned(), Value::from(id))]);
        // A fabric with a Slurm cluster: its join, key included, as its nodes carry it (never made anew).
        let join = slurm_join_of(step.ctx, &client, compartment, name).await.map_err(ImportError::failed)?;
        Ok(Imported::new(config, assigned).with_slurm_join(join))
    }

    /// A network the fabric created: its VCN and subnet OCIDs, as they are found.
    async fn imported(&self, step: &Step<'_>, spec: &FabricSpec, found: &mut Imported) -> Result<(), ImportError> {
        if let Network::Create { .. } = &spec.network {
            let client = api::connect(step.ctx, &spec.region).map_err(ImportError::failed)?;
            let live = fabric::observe(step.ctx, &client, spec, compartment_of(spec), step.census).await.map_err(ImportError::failed)?;
            for (attr, piece) in [("vpc_id", &live.vcn), ("subnet_id", &live.subnet)] {
                if let Some(ocid) = piece.as_ref().and_then(|p| p["id"].as_str()) {
                    found.assigned.insert(attr.to_owned(), Value::from(ocid));
                }
            }
        }
        Ok(())
    }
}

/// The Slurm join the fabric's GPU nodes boot with, from their instance configurations (tagged with the
/// fabric; the user data in `launchDetails.metadata`): one list, then one read per configuration until a join
/// is found; null without one.
async fn slurm_join_of(ctx: &Context, oci: &Oci, compartment: &str, fabric: &str) -> Result<Value, CloudError> {
    use base64::Engine;
    let all = oci.list(ctx, Service::Core, "instanceConfigurations", &format!("compartmentId={}", encode(compartment))).await?;
    for summary in all.iter().filter(|c| tags_of(c).get("hpc:fabric").map(String::as_str) == Some(fabric)) {
        let id = summary["id"].as_str().unwrap_or_default();
        let Some(config) = oci.get(ctx, Service::Core, &format!("/instanceConfigurations/{id}")).await? else { continue };
        let data = config["instanceDetails"]["launchDetails"]["metadata"]["user_data"]
            .as_str()
            .and_then(|c| base64::engine::general_purpose::STANDARD.decode(c).ok())
            .and_then(|b| String::from_utf8(b).ok());
        let join = crate::clouds::slurm::join_value(data.as_deref());
        if join.is_present() {
            return Ok(join);
        }
    }
    Ok(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_imported_fabric_keeps_the_users_name_tag() {
        // `Name` is reserved on AWS (its console writes it) but is an ordinary user tag on OCI.
        let nsg = json!({"freeformTags": {"Name": "x", "team": "ml", "env": "prod", "hpc:owner": "o", "hpc:fabric": "lib",
                                          "hpc:instance-type": "BM.GPU.H100.8", "hpc:placement": "cluster", "hpc:cidr": "10.0.0.0/16"}});
        let defaults = BTreeMap::from([("env".to_owned(), "prod".to_owned())]);
        let config = imported_config("us-ashburn-1", "ocid1.compartment.oc1..lib", "lib", &nsg, &defaults).unwrap();
        let tags = config.get("tags").as_map().map(|m| m.keys().cloned().collect::<Vec<_>>()).unwrap_or_default();
        assert_eq!(tags, ["Name", "team"], "the provider's keys and the provider's default_tags are left out, the user's kept");
        assert_eq!(config.get("tags").get("Name").as_str(), Some("x"));
    }
}
