//! Quotas and capacity, as each cloud names them: the quota a cluster's nodes draw on ([`QuotaFamily`], from
//! a cluster backend's `quota`) and what the cloud says of it ([`QuotaReading`], from `read_quota`); "no
//! capacity" is a kind of `CloudError`, with the cloud's code. The check itself (cached per run, claims of the
//! clusters in one plan, the diagnostic) is the same for every cloud: `resources::capacity`.

use crate::catalog::Cloud;
use crate::model::{CapacityPolicy, CapacityType, ClusterSpec, Workload};

/// One quota a cluster's nodes draw on, in one place.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QuotaFamily {
    pub cloud: Cloud,
    /// Where the quota applies: the region (Azure: location; OCI: availability domain).
    pub scope: String,
    /// The cloud's id for it: `L-417A185B` (AWS Service Quotas), `NVIDIA_H100_GPUS` (Compute Engine
    /// regional quota metric), `standardNDSH100v5Family` (Azure compute usage), `gpu-h100-count` (OCI limit).
    pub id: String,
    /// The cloud's own name for it: `Running On-Demand P instances`.
    pub name: String,
    /// What it counts: `vCPUs`, `GPUs`, `instances`.
    pub unit: &'static str,
    /// Units one node takes.
    pub per_node: u64,
    /// How to ask for more: the console page or CLI command, with the quota's id.
    pub request: String,
}

/// What the cloud says of a quota: its limit and what is in use now, in the family's unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuotaReading {
    pub limit: u64,
    pub used: u64,
}

impl QuotaReading {
    pub fn free(&self) -> u64 {
        self.limit.saturating_sub(self.used)
    }
}

/// What could help when a zone has no capacity for the node type, for this cluster.
pub fn capacity_options(spec: &ClusterSpec) -> Vec<String> {
    let cloud = spec.fabric.cloud;
    let place = match cloud {
        Cloud::Azure => "another region (Azure places a scale set within its location)".to_owned(),
        Cloud::Oci => format!("another availability domain of {} (the fabric's zone)", spec.fabric.region),
        Cloud::Aws | Cloud::Gcp => format!("another zone of {} (the fabric's zone)", spec.fabric.region),
    };
    let mut out = vec![place];
    if matches!(spec.capacity, CapacityType::OnDemand | CapacityType::Spot) {
        out.push(match cloud {
            Cloud::Aws => {
                "a Capacity Block or an On-Demand Capacity Reservation (capacity_type = \"capacity-block\" or \"reservation\" with \
                           reservation_id)"
                    .to_owned()
            }
            Cloud::Gcp => "a reservation (capacity_type = \"reservation\" with reservation_id)".to_owned(),
            Cloud::Azure => "a capacity reservation group (capacity_type = \"reservation\" with reservation_id)".to_owned(),
            Cloud::Oci => "a capacity reservation (capacity_type = \"reservation\" with reservation_id)".to_owned(),
        });
    }
    if cloud == Cloud::Gcp && spec.capacity != CapacityType::FlexStart && spec.workload != Workload::Inference {
        out.push("flex-start, which waits for the capacity in the zone (capacity_type = \"flex-start\")".to_owned());
    }
    // Spot nodes can go at any time: for serving and checkpointed fine-tuning, not for pre-training runs.
    if spec.capacity == CapacityType::OnDemand && spec.workload != Workload::Pretraining {
        out.push(format!("spot capacity (capacity_type = \"spot\"), which {} workloads can take", spec.workload.as_str()));
    }
    if spec.capacity_policy == CapacityPolicy::AllOrNothing && !spec.workload.trains() {
        out.push("capacity_policy = \"at-least\" with min_nodes, to keep what comes".to_owned());
    }
    out
}
