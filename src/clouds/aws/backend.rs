//! AWS as a lifecycle backend: each step connects to the region's EC2/FSx clients and converges, deletes,
//! observes or reconstructs through `fabric`, `cluster` and `filesystem`.

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::{api, fabric};
use crate::clouds::backend::{Backend, Change, ClusterBackend, ImportError, Imported, Outcome, Parse, Step};
use crate::clouds::shared;
use crate::framework::{Context, Value};
use crate::model::{ClusterSpec, FabricSpec, FilesystemSpec};

/// The AWS backend of every resource kind.
pub struct Aws;

/// The existing network a fabric joins, from a state or configuration (none when it made its own).
fn given_network(v: &Value) -> Option<(&str, &str)> {
    if v.get("cidr_block").is_present() {
        return None;
    }
    Some((v.get("vpc_id").as_str()?, v.get("subnet_id").as_str()?))
}

fn region_and_name(v: &Value) -> (&str, &str) {
    (v.get("region").as_str().unwrap_or_default(), v.get("name").as_str().unwrap_or_default())
}

#[async_trait]
impl Backend<FabricSpec> for Aws {
    async fn configured(&self, _ctx: &Context) -> Result<(), String> {
        // The SDK's credential chain is resolved per call; a client is always made.
        Ok(())
    }

    fn id(&self, spec: &FabricSpec) -> Option<String> {
        Some(api::resource_id(&spec.region, &spec.name))
    }

    fn place(&self, v: &Value) -> String {
        format!("in {}", v.get("region").as_str().unwrap_or_default())
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, FabricSpec>) -> Outcome {
        let spec = change.spec;
        let client = api::connect(step.ctx, &spec.region).await;
        let stale = change.stale_tags();
        let gpu = change.config.get("gpu").as_str();
        let (ids, error) = match fabric::converge(&client, spec, gpu, change.tags, &stale, step.census).await {
            Ok(ids) => (ids, None),
            Err((ids, e)) => (ids, Some(e)),
        };
        let mut state = change.state.clone();
        if let Some(v) = ids.vpc_id {
            state = shared::with_attr(&state, "vpc_id", Value::from(v));
        }
        if let Some(s) = ids.subnet_id {
            state = shared::with_attr(&state, "subnet_id", Value::from(s));
        }
        Outcome { state, error }
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, _parse: &Parse<'_, FabricSpec>) -> Outcome {
        let (region, name) = region_and_name(prior);
        let client = api::connect(step.ctx, region).await;
        let done = fabric::delete(step.ctx, &client, name, given_network(prior), step.timeout, step.census).await;
        Outcome::of(done, Value::Null, || prior.clone())
    }

    async fn read(&self, step: &Step<'_>, state: &Value, _parse: &Parse<'_, FabricSpec>) -> Result<Option<Value>, String> {
        let (region, name) = region_and_name(state);
        let client = api::connect(step.ctx, region).await;
        let live = fabric::observe(&client, name, given_network(state), step.census).await?;
        if live.is_empty() {
            return Ok(None);
        }
        let kinds = fabric::present_kinds(&live);
        Ok(Some(shared::with_missing(state, |k| kinds.contains(&k))))
    }

    async fn import(&self, step: &Step<'_>, id: &str, _parse: &Parse<'_, FabricSpec>) -> Result<Imported, ImportError> {
        let Some((region, name)) = api::parse_id(id) else {
            return Err(ImportError::BadId(format!(
                "{id:?} is not an AWS fabric id: give \"aws/<region>/<fabric name>\", e.g. \"aws/us-east-1/train\"."
            )));
        };
        let client = api::connect(step.ctx, region).await;
        let live = fabric::observe(&client, name, None, step.census).await.map_err(ImportError::Failed)?;
        let config = fabric::imported_config(region, name, &live, step.default_tags).map_err(ImportError::Failed)?;
        let mut assigned = BTreeMap::from([("id".to_owned(), Value::from(id))]);
        if let Some((vpc, _, _)) = &live.vpc {
            assigned.insert("vpc_id".to_owned(), Value::from(vpc.as_str()));
        }
        if let Some((subnet, _)) = &live.subnet {
            assigned.insert("subnet_id".to_owned(), Value::from(subnet.as_str()));
        }
        Ok(Imported { config, assigned })
    }
}

// PLACEHOLDER below: being ported.

#[async_trait]
impl Backend<ClusterSpec> for Aws {
    async fn configured(&self, _ctx: &Context) -> Result<(), String> {
        unimplemented!()
    }
    fn id(&self, _spec: &ClusterSpec) -> Option<String> {
        unimplemented!()
    }
    fn place(&self, _v: &Value) -> String {
        unimplemented!()
    }
    async fn apply(&self, _step: &Step<'_>, _change: &Change<'_, ClusterSpec>) -> Outcome {
        unimplemented!()
    }
    async fn delete(&self, _step: &Step<'_>, _prior: &Value, _parse: &Parse<'_, ClusterSpec>) -> Outcome {
        unimplemented!()
    }
    async fn read(&self, _step: &Step<'_>, _state: &Value, _parse: &Parse<'_, ClusterSpec>) -> Result<Option<Value>, String> {
        unimplemented!()
    }
    async fn import(&self, _step: &Step<'_>, _id: &str, _parse: &Parse<'_, ClusterSpec>) -> Result<Imported, ImportError> {
        unimplemented!()
    }
}

#[async_trait]
impl ClusterBackend for Aws {
    fn node_piece(&self) -> &'static str {
        unimplemented!()
    }
    async fn look_for_nodes(&self, _step: &Step<'_>, _spec: &ClusterSpec) -> Result<(), String> {
        unimplemented!()
    }
}

#[async_trait]
impl Backend<FilesystemSpec> for Aws {
    async fn configured(&self, _ctx: &Context) -> Result<(), String> {
        unimplemented!()
    }
    fn id(&self, _spec: &FilesystemSpec) -> Option<String> {
        unimplemented!()
    }
    fn place(&self, _v: &Value) -> String {
        unimplemented!()
    }
    async fn apply(&self, _step: &Step<'_>, _change: &Change<'_, FilesystemSpec>) -> Outcome {
        unimplemented!()
    }
    async fn delete(&self, _step: &Step<'_>, _prior: &Value, _parse: &Parse<'_, FilesystemSpec>) -> Outcome {
        unimplemented!()
    }
    async fn read(&self, _step: &Step<'_>, _state: &Value, _parse: &Parse<'_, FilesystemSpec>) -> Result<Option<Value>, String> {
        unimplemented!()
    }
    async fn import(&self, _step: &Step<'_>, _id: &str, _parse: &Parse<'_, FilesystemSpec>) -> Result<Imported, ImportError> {
        unimplemented!()
    }
}
