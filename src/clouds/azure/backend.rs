//! PLACEHOLDER: being ported.

use async_trait::async_trait;

use crate::clouds::backend::{Backend, Change, ClusterBackend, ImportError, Imported, Outcome, Parse, Step};
use crate::framework::{Context, Value};
use crate::model::{ClusterSpec, FabricSpec, FilesystemSpec};

pub struct Azure;

#[async_trait]
impl Backend<FabricSpec> for Azure {
    async fn configured(&self, _ctx: &Context) -> Result<(), String> {
        unimplemented!()
    }
    fn id(&self, _spec: &FabricSpec) -> Option<String> {
        unimplemented!()
    }
    fn place(&self, _v: &Value) -> String {
        unimplemented!()
    }
    async fn apply(&self, _step: &Step<'_>, _change: &Change<'_, FabricSpec>) -> Outcome {
        unimplemented!()
    }
    async fn delete(&self, _step: &Step<'_>, _prior: &Value, _parse: &Parse<'_, FabricSpec>) -> Outcome {
        unimplemented!()
    }
    async fn read(&self, _step: &Step<'_>, _state: &Value, _parse: &Parse<'_, FabricSpec>) -> Result<Option<Value>, String> {
        unimplemented!()
    }
    async fn import(&self, _step: &Step<'_>, _id: &str, _parse: &Parse<'_, FabricSpec>) -> Result<Imported, ImportError> {
        unimplemented!()
    }
}

#[async_trait]
impl Backend<ClusterSpec> for Azure {
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
impl ClusterBackend for Azure {
    fn node_piece(&self) -> &'static str {
        unimplemented!()
    }
    async fn look_for_nodes(&self, _step: &Step<'_>, _spec: &ClusterSpec) -> Result<(), String> {
        unimplemented!()
    }
}

#[async_trait]
impl Backend<FilesystemSpec> for Azure {
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
