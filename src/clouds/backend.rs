//! The one interface between the lifecycle (`resources::lifecycle`) and a cloud: a backend per resource
//! kind, implemented beside that kind (`clouds/<cloud>/fabric.rs`, `cluster.rs`, `filesystem.rs`, on the
//! type in `clouds/<cloud>/backend.rs`) and chosen by [`fabric`], [`cluster`] and
//! [`filesystem`], each one exhaustive match on the cloud, so a cloud added to `Cloud` does not compile
//! until it provides every operation.
//!
//! The lifecycle owns what is the same everywhere (create, update and delete told apart, timeouts and
//! their defaults, tags and `default_tags`, the owner's marker, diagnostics and their wording, a failed
//! create keeping what exists, imported state built from the configuration an import reconstructs); a
//! backend only speaks to its cloud: it converges, deletes, observes and reconstructs.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;

use super::error::CloudError;
use super::quota::{QuotaFamily, QuotaReading};
use super::{aws, azure, gcp, oci};
use crate::catalog::Cloud;
use crate::framework::{Context, Value};
use crate::model::{ClusterSpec, FabricSpec, FilesystemSpec, NodePoolSpec, SlurmSpec};
use crate::ownership::Census;

/// What every step hands a backend besides its inputs.
pub struct Step<'a> {
    pub ctx: &'a Context,
    /// The owner's view of the cloud: admits only the owner's pieces and gates every create.
    pub census: &'a Census,
    /// The provider's `default_tags`, which an import leaves out of the user's tags.
    pub default_tags: &'a BTreeMap<String, String>,
    /// How long the step may take, from the resource's `timeouts` block or its default.
    pub timeout: Duration,
}

/// A create (`prior` null) or an update.
pub struct Change<'a, S> {
    pub spec: &'a S,
    pub config: &'a Value,
    pub prior: &'a Value,
    /// The plan; `state` is it with the id filled in and every unknown null.
    pub planned: &'a Value,
    pub state: &'a Value,
    /// Every tag the pieces get now: `default_tags`, the resource's, the provider's own, the owner's marker.
    pub tags: &'a BTreeMap<String, String>,
    /// The same for the prior state (empty on a create): a key in it and not in `tags` is removed.
    pub prior_tags: &'a BTreeMap<String, String>,
}

impl<S> Change<'_, S> {
    pub fn creating(&self) -> bool {
        self.prior.is_null()
    }

    /// The tag keys the pieces had and no longer get.
    pub fn stale_tags(&self) -> Vec<String> {
        super::shared::stale_tags(self.prior_tags, self.tags)
    }

    /// Whether any tag changed (a create counts as none).
    pub fn retag(&self) -> bool {
        !self.creating() && self.prior_tags != self.tags
    }
}

/// What an apply or delete leaves: the new state (null when nothing exists any more) and the error that
/// stopped it, if one did. A failed step still returns everything that exists, so nothing is lost.
pub struct Outcome {
    pub state: Value,
    pub error: Option<CloudError>,
}

impl Outcome {
    pub fn done(state: Value) -> Outcome {
        Outcome { state, error: None }
    }

    pub fn failed(state: Value, error: impl Into<CloudError>) -> Outcome {
        Outcome { state, error: Some(error.into()) }
    }

    /// `Ok` becomes `done(on_ok)`, `Err` becomes `failed(on_err)`.
    pub fn of<E: Into<CloudError>>(result: Result<(), E>, on_ok: Value, on_err: impl FnOnce() -> Value) -> Outcome {
        match result {
            Ok(()) => Outcome::done(on_ok),
            Err(e) => Outcome::failed(on_err(), e),
        }
    }
}

/// What an import found: the configuration that would make the object, and the attributes the cloud
/// assigned (ids), which the lifecycle combines with what the planner derives from that configuration.
pub struct Imported {
    pub config: Value,
    pub assigned: BTreeMap<String, Value>,
    /// What runs, in the shape of a state, where the configuration alone cannot say how the planner lays
    /// it out (Azure's scale sets and their sizes, as an `expansion`); null elsewhere.
    pub observed: Value,
}

impl Imported {
    /// An import whose layout the configuration says.
    pub fn new(config: Value, assigned: BTreeMap<String, Value>) -> Imported {
        Imported { config, assigned, observed: Value::Null }
    }

    /// A fabric's import with the Slurm join its nodes carry (`slurm = true` and `slurm_join`, key included:
    /// never made anew); as it was when `join` is null (no Slurm on the fabric).
    pub fn with_slurm_join(mut self, join: Value) -> Imported {
        if join.is_present()
            && let Value::Map(c) = &mut self.config
        {
            c.insert("slurm".into(), Value::from(true));
            self.assigned.insert("slurm_join".into(), join);
        }
        self
    }
}

pub enum ImportError {
    /// The id has the wrong form; the text shows the right one with an example.
    BadId(String),
    /// Nothing importable answers to the id, or the cloud said no.
    Failed(CloudError),
}

impl ImportError {
    pub fn failed(e: impl Into<CloudError>) -> ImportError {
        ImportError::Failed(e.into())
    }
}

/// One resource kind on one cloud.
#[async_trait]
pub trait Backend<S: Send + Sync>: Send + Sync {
    /// Whether the provider's block for this cloud can make a client; the text says what is wrong.
    async fn configured(&self, ctx: &Context) -> Result<(), CloudError>;

    /// The id a create assigns (`<cloud>/<location>/<name>`), known before any call so an interrupted create
    /// resumes under it; `None` where the cloud assigns it (the lifecycle then leaves it to `apply`).
    fn id(&self, spec: &S) -> Option<String>;

    /// Where the object of a state or configuration lives, for messages: `in us-east-1`.
    fn place(&self, v: &Value) -> String;

    /// A diagnostic summary that says more than the lifecycle's for this error (e.g. failed authentication),
    /// decided by its kind.
    fn summary(&self, _error: &CloudError) -> Option<&'static str> {
        None
    }

    /// Creates or updates everything the spec describes; the state returned carries what the cloud assigned.
    async fn apply(&self, step: &Step<'_>, change: &Change<'_, S>) -> Outcome;

    /// Deletes what `prior` describes; on failure, the state of what is left (or `prior`). `spec` is the
    /// lifecycle's reading of `prior` (`None` when it describes nothing this release can parse).
    async fn delete(&self, step: &Step<'_>, prior: &Value, spec: Option<&S>) -> Outcome;

    /// The state brought to what exists, `None` when nothing does. `spec` is the lifecycle's reading of
    /// `state`, as for [`Backend::delete`].
    async fn read(&self, step: &Step<'_>, state: &Value, spec: Option<&S>) -> Result<Option<Value>, CloudError>;

    /// Reconstructs the configuration of what answers to `id`.
    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError>;

    /// After [`Backend::import`], with the lifecycle's reading of the configuration it reconstructed: the
    /// attributes the cloud assigned that only that reading tells (a created network's ids). Not called when
    /// the configuration does not parse (the lifecycle's derivation reports why).
    async fn imported(&self, _step: &Step<'_>, _spec: &S, _found: &mut Imported) -> Result<(), ImportError> {
        Ok(())
    }
}

/// What a cluster's backend provides beyond the common steps.
#[async_trait]
pub trait ClusterBackend: Backend<ClusterSpec> {
    /// The kind of the node piece in a cluster's expansion.
    fn node_piece(&self) -> &'static str;

    /// The node groups a state says the cluster runs in, with their sizes, in order (Azure's scale sets,
    /// from its expansion): the plan and the apply lay a change out around them. Empty where nodes stand
    /// alone (every node its own instance, named by index), which a change never resizes.
    fn running_groups(&self, _state: &Value) -> Vec<u32> {
        Vec::new()
    }

    /// Before a cluster without a fabric makes its network: whether its nodes' names are free (another
    /// owner's nodes refuse the create here, so that not even the network is made).
    async fn look_for_nodes(&self, step: &Step<'_>, spec: &ClusterSpec) -> Result<(), CloudError>;

    /// Day 2: deletes the named nodes and waits until they are gone, so that the apply which follows makes
    /// them again under their own names, with the spec's configuration, in their placement group, scale
    /// set or compute cluster and their reservation. Only nodes the census admits are touched.
    async fn remove_nodes(&self, step: &Step<'_>, spec: &ClusterSpec, names: &[String]) -> Result<(), CloudError>;

    /// Capacity policy: deletes the named nodes for good (what an apply launched that the policy does not
    /// keep) and returns once the cloud confirms they are gone. Where [`ClusterBackend::remove_nodes`]
    /// deletes, it is that; where it remakes in place (Azure), this deletes.
    async fn release_nodes(&self, step: &Step<'_>, spec: &ClusterSpec, names: &[String]) -> Result<(), CloudError> {
        self.remove_nodes(step, spec, names).await
    }

    /// Day 2: restarts the named nodes in place (`repair = "reboot"`) and waits until they run again.
    async fn reboot_nodes(&self, step: &Step<'_>, spec: &ClusterSpec, names: &[String]) -> Result<(), CloudError>;

    /// The quota the nodes of `spec` draw on, with what one node takes of it; `None` where they draw on
    /// none the provider reads (nodes launched into a reservation or a capacity block the user holds, whose
    /// size is the bound), or the provider knows no quota for the node type.
    fn quota(&self, _spec: &ClusterSpec) -> Option<QuotaFamily> {
        None
    }

    /// Where the nodes of `spec` draw on a quota the provider cannot read: what it is and how to check it by
    /// hand (the plan warns instead of passing in silence).
    fn unread_quota(&self, _spec: &ClusterSpec) -> Option<String> {
        None
    }

    /// Every quota the nodes of `spec` draw on, [`ClusterBackend::quota`] first: a node can count against
    /// more than one (Azure: its VM family's vCPUs and the location's total, `cores`), and the plan-time
    /// check holds the cluster to each.
    fn quotas(&self, spec: &ClusterSpec) -> Vec<QuotaFamily> {
        self.quota(spec).into_iter().collect()
    }

    /// Reads a quota's limit and usage: one call per family and place (the plan-time check caches it for
    /// the run, across resources). An error (no permission, no such API at the endpoint) makes the check
    /// a warning, never a failure.
    async fn read_quota(&self, _ctx: &Context, family: &QuotaFamily) -> Result<QuotaReading, CloudError> {
        Err(format!("reading {} is not supported", family.id).into())
    }

    /// Reads the quotas `families` (all of one scope) in as few calls as the cloud allows, and gives every
    /// reading those calls brought, by quota id: the asked ones the cloud reports, and any other of the
    /// scope the same answer listed (Azure's one usages list has every family of the location), which
    /// the check keeps for the rest of the run. An asked quota the answer lacks is missing from the map;
    /// an error is the read's as a whole. By default one [`ClusterBackend::read_quota`] per family.
    async fn read_quotas(&self, ctx: &Context, families: &[QuotaFamily]) -> Result<BTreeMap<String, QuotaReading>, CloudError> {
        let mut out = BTreeMap::new();
        for family in families {
            out.insert(family.id.clone(), self.read_quota(ctx, family).await?);
        }
        Ok(out)
    }

    /// A state stored under an older schema version, brought to what this release plans for this cloud
    /// (nothing changes in the cloud).
    fn upgrade(&self, _version: i64, state: Value) -> Value {
        state
    }
}

/// The fabric backend of `cloud`.
pub fn fabric(cloud: Cloud) -> &'static dyn Backend<FabricSpec> {
    match cloud {
        Cloud::Aws => &aws::backend::Aws,
        Cloud::Azure => &azure::backend::Azure,
        Cloud::Gcp => &gcp::backend::Gcp,
        Cloud::Oci => &oci::backend::Oci,
    }
}

/// The cluster backend of `cloud`.
pub fn cluster(cloud: Cloud) -> &'static dyn ClusterBackend {
    match cloud {
        Cloud::Aws => &aws::backend::Aws,
        Cloud::Azure => &azure::backend::Azure,
        Cloud::Gcp => &gcp::backend::Gcp,
        Cloud::Oci => &oci::backend::Oci,
    }
}

/// The filesystem backend of `cloud`.
pub fn filesystem(cloud: Cloud) -> &'static dyn Backend<FilesystemSpec> {
    match cloud {
        Cloud::Aws => &aws::backend::Aws,
        Cloud::Azure => &azure::backend::Azure,
        Cloud::Gcp => &gcp::backend::Gcp,
        Cloud::Oci => &oci::backend::Oci,
    }
}

/// The Slurm cluster backend of `cloud`.
pub fn slurm(cloud: Cloud) -> &'static dyn Backend<SlurmSpec> {
    match cloud {
        Cloud::Aws => &aws::backend::Aws,
        Cloud::Azure => &azure::backend::Azure,
        Cloud::Gcp => &gcp::backend::Gcp,
        Cloud::Oci => &oci::backend::Oci,
    }
}

/// What the Kubernetes cluster a pool joins says of the pool, read at plan time.
pub struct ClusterFacts {
    /// The control plane's version (`1.33`), when the cloud reports it.
    pub version: Option<(u32, u32)>,
    /// What keeps the cluster from hosting the pool, each at the attribute to change: (attribute, summary, detail).
    pub refusals: Vec<(&'static str, String, String)>,
}

/// What a node pool's backend provides beyond the common steps.
#[async_trait]
pub trait NodePoolBackend: Backend<NodePoolSpec> {
    /// The plan's one read of the cloud for a pool: the Kubernetes cluster it joins (that it exists where
    /// the fabric is, and its version). `Ok(None)` where nothing is read.
    async fn cluster_facts(&self, _ctx: &Context, _spec: &NodePoolSpec) -> Result<Option<ClusterFacts>, CloudError> {
        Ok(None)
    }
}

/// The node pool backend of `cloud`: EKS node groups on AWS, AKS agent pools on Azure, GKE node pools on Google Cloud,
/// self-managed OKE workers on OCI.
pub fn node_pool(cloud: Cloud) -> &'static dyn NodePoolBackend {
    match cloud {
        Cloud::Aws => &aws::backend::Aws,
        Cloud::Azure => &azure::backend::Azure,
        Cloud::Gcp => &gcp::backend::Gcp,
        Cloud::Oci => &oci::backend::Oci,
    }
}
