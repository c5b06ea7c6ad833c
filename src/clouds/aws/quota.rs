//! The EC2 quotas a cluster's nodes draw on, as Service Quotas names them (service code `ec2`), and how
//! they are read: the limit with GetServiceQuota, what is in use with one DescribeInstances of the family's
//! instance types (pending or running), summing their vCPUs. EC2's instance quotas count vCPUs per instance
//! family and per region, on-demand and spot apart.
//!
//! Where the quota codes come from: botocore's Service Quotas model lists no quota codes (they are data,
//! not API), so each code below is the one the Service Quotas console and `aws service-quotas
//! list-service-quotas --service-code ec2` give for the name beside it, as several independent public tools
//! that read these quotas use them (e.g. on-demand and spot tables keyed P -> L-417A185B / L-7212CCBC and
//! G -> L-DB2E81BA / L-3819A6DF). Not confirmed against a vendor-published machine-readable definition:
//! there is none for quota codes.

use aws_sdk_ec2::types::{Instance, InstanceLifecycleType};

use super::api::{Aws, filter, why};
use crate::catalog::Cloud;
use crate::clouds::CloudError;
use crate::clouds::quota::{QuotaFamily, QuotaReading};
use crate::model::{CapacityType, ClusterSpec};

/// The service code of EC2's quotas in Service Quotas.
pub const SERVICE_CODE: &str = "ec2";

/// One EC2 instance quota: its code, its name, and the instance types it counts (DescribeInstances
/// `instance-type` wildcards).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ec2Quota {
    pub code: &'static str,
    pub name: &'static str,
    pub types: &'static [&'static str],
    /// Counts spot instances (else instances launched on demand, in a capacity reservation included).
    pub spot: bool,
}

/// "Running On-Demand P instances": vCPUs of running on-demand P instances (p4d, p5, p5e, p5en, p6-b200,
/// p6-b300). Code as the console lists it; not in botocore's model (see the module comment).
pub const ON_DEMAND_P: Ec2Quota = Ec2Quota { code: "L-417A185B", name: "Running On-Demand P instances", types: &["p*"], spot: false };
/// "Running On-Demand G and VT instances": vCPUs of running on-demand G and VT instances (g5, g6, g6e).
pub const ON_DEMAND_G: Ec2Quota =
    Ec2Quota { code: "L-DB2E81BA", name: "Running On-Demand G and VT instances", types: &["g*", "vt*"], spot: false };
/// "All P Spot Instance Requests": vCPUs of running or requested P spot instances.
pub const SPOT_P: Ec2Quota = Ec2Quota { code: "L-7212CCBC", name: "All P Spot Instance Requests", types: &["p*"], spot: true };
/// "All G and VT Spot Instance Requests": vCPUs of running or requested G and VT spot instances.
pub const SPOT_G: Ec2Quota =
    Ec2Quota { code: "L-3819A6DF", name: "All G and VT Spot Instance Requests", types: &["g*", "vt*"], spot: true };

pub const ALL: [Ec2Quota; 4] = [ON_DEMAND_P, ON_DEMAND_G, SPOT_P, SPOT_G];

/// The quota a node of `instance_type` launched as `capacity` draws on. `None` in a reservation or a
/// Capacity Block (the user's reservation bounds it), for UltraServer-only types (bought as Capacity Blocks
/// only), and for families the table does not know. `flex-start` is no EC2 market: such nodes launch on
/// demand and draw on the on-demand quota.
pub fn ec2_quota(instance_type: &str, capacity: CapacityType) -> Option<Ec2Quota> {
    let spot = match capacity {
        CapacityType::OnDemand | CapacityType::FlexStart => false,
        CapacityType::Spot => true,
        CapacityType::Reservation | CapacityType::CapacityBlock => return None,
    };
    if let Some(sku) = crate::catalog::find_sku(Cloud::Aws, instance_type)
        && super::ultraserver_type(sku).is_some()
    {
        return None;
    }
    let family: String = instance_type.chars().take_while(|c| c.is_ascii_alphabetic()).collect();
    let (on_demand, on_spot) = match family.as_str() {
        "p" => (ON_DEMAND_P, SPOT_P),
        "g" | "vt" => (ON_DEMAND_G, SPOT_G),
        _ => return None,
    };
    Some(if spot { on_spot } else { on_demand })
}

/// vCPUs of a node type (the default: cores x threads per core), for the plan's figures and where
/// DescribeInstances gives no CpuOptions. Source of each: the EC2 instance type pages ("Accelerated
/// computing instance specifications") and DescribeInstanceTypes `VCpuInfo.DefaultVCpus`, as botocore-based
/// moto 5.2.5's instance-type data records them.
pub fn vcpus(instance_type: &str) -> Option<u64> {
    Some(match instance_type {
        // P5, P5e, P5en: 96 cores x 2 threads (DescribeInstanceTypes DefaultVCpus 192).
        "p5.48xlarge" | "p5e.48xlarge" | "p5en.48xlarge" => 192,
        // P6-B200, P6-B300: 192 vCPUs (DescribeInstanceTypes DefaultVCpus 192).
        "p6-b200.48xlarge" | "p6-b300.48xlarge" => 192,
        // P6e-GB200: 144 vCPUs (UNCONFIRMED: from the 36xlarge size; sold as UltraServer Capacity Blocks only).
        "p6e-gb200.36xlarge" => 144,
        // P4d: 48 cores x 2 threads.
        "p4d.24xlarge" | "p4de.24xlarge" => 96,
        // G6e.48xlarge: 96 cores x 2 threads.
        "g6e.48xlarge" => 192,
        // G6.xlarge, G5.xlarge: 2 cores x 2 threads.
        "g6.xlarge" | "g5.xlarge" => 4,
        _ => return None,
    })
}

/// The quota `spec`'s nodes draw on, in `spec`'s region, with the vCPUs one node takes.
pub fn family(spec: &ClusterSpec) -> Option<QuotaFamily> {
    let sku = spec.fabric.sku.name;
    let q = ec2_quota(sku, spec.capacity)?;
    let per_node = vcpus(sku)?;
    Some(QuotaFamily {
        cloud: Cloud::Aws,
        scope: spec.fabric.region.clone(),
        id: q.code.to_owned(),
        name: q.name.to_owned(),
        unit: "vCPUs",
        per_node,
        request: request(q.code, &spec.fabric.region),
    })
}

/// How to ask for more: the CLI call (with a placeholder for the value) and the console page.
pub fn request(code: &str, region: &str) -> String {
    format!(
        "aws service-quotas request-service-quota-increase --region {region} --service-code {SERVICE_CODE} --quota-code {code} \
         --desired-value <vCPUs>, or the console: https://{region}.console.aws.amazon.com/servicequotas/home/services/ec2/quotas/{code}"
    )
}

/// The quota of a family by its code.
fn by_code(code: &str) -> Option<Ec2Quota> {
    ALL.into_iter().find(|q| q.code == code)
}

/// Whether an instance counts toward `q`: spot instances toward the spot quotas, instances launched on
/// demand (in a capacity reservation or not) toward the on-demand ones; Capacity Block instances toward
/// neither.
fn counts(q: &Ec2Quota, i: &Instance) -> bool {
    match i.instance_lifecycle() {
        Some(InstanceLifecycleType::Spot) => q.spot,
        Some(InstanceLifecycleType::CapacityBlock) => false,
        _ => !q.spot,
    }
}

/// vCPUs of one instance: its CpuOptions (cores x threads per core) where EC2 gives them, else the table.
fn instance_vcpus(i: &Instance) -> u64 {
    // EC2's counts are i32: a negative one made a huge u64 (`as`), and the product overflowed.
    let count = |n: Option<i32>| n.and_then(|n| u64::try_from(n).ok());
    let from_options = i.cpu_options().and_then(|c| count(c.core_count())?.checked_mul(count(c.threads_per_core())?)).filter(|n| *n > 0);
    from_options.or_else(|| i.instance_type().and_then(|t| vcpus(t.as_str()))).unwrap_or(0)
}

/// Reads a family's limit (GetServiceQuota; the AWS default when the account has no applied value) and
/// usage (one DescribeInstances of the family's types, pending or running, paged).
pub async fn read(aws: &Aws, family: &QuotaFamily) -> Result<QuotaReading, CloudError> {
    let q = by_code(&family.id).ok_or_else(|| CloudError::other(format!("{} is not an EC2 quota this provider reads", family.id)))?;
    let limit = limit(aws, q).await?;
    let used = usage(aws, q).await?;
    Ok(QuotaReading { limit, used })
}

async fn limit(aws: &Aws, q: Ec2Quota) -> Result<u64, CloudError> {
    let call = |e: &dyn std::fmt::Display| {
        format!("reading Service Quotas {SERVICE_CODE}/{} ({}) in {} (GetServiceQuota): {e}", q.code, q.name, aws.region)
    };
    let value = match aws.quotas.get_service_quota().service_code(SERVICE_CODE).quota_code(q.code).send().await {
        Ok(out) => out.quota().and_then(|v| v.value()),
        // No value applied to the account: the AWS default is the limit.
        Err(e) if super::api::code(&e) == Some("NoSuchResourceException") => aws
            .quotas
            .get_aws_default_service_quota()
            .service_code(SERVICE_CODE)
            .quota_code(q.code)
            .send()
            .await
            .map_err(|e| {
                format!(
                    "reading the AWS default of Service Quotas {SERVICE_CODE}/{} ({}) in {} (GetAWSDefaultServiceQuota): {}",
                    q.code,
                    q.name,
                    aws.region,
                    why(&e)
                )
            })?
            .quota()
            .and_then(|v| v.value()),
        Err(e) => return Err(CloudError { message: call(&why(&e)), ..super::api::error(&e) }),
    };
    let value = value.ok_or_else(|| call(&"the answer has no Quota.Value"))?;
    Ok(if value.is_finite() && value > 0.0 { value.floor() as u64 } else { 0 })
}

async fn usage(aws: &Aws, q: Ec2Quota) -> Result<u64, CloudError> {
    let mut used: u64 = 0;
    let mut token: Option<String> = None;
    let mut pages = crate::clouds::shared::Pages::new("EC2", "NextToken");
    loop {
        let page = aws
            .ec2
            .describe_instances()
            .filters(filter("instance-type", q.types))
            .filters(filter("instance-state-name", &["pending", "running"]))
            .set_next_token(token.take())
            .max_results(1000)
            .send()
            .await
            .map_err(|e| {
                format!("counting the vCPUs in use of {} ({}) in {} (DescribeInstances): {}", q.code, q.name, aws.region, why(&e))
            })?;
        // Saturating: EC2's figures are not trusted to add up inside u64.
        used = page
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .filter(|i| counts(&q, i))
            .map(instance_vcpus)
            .fold(used, u64::saturating_add);
        match pages.next(page.next_token().filter(|t| !t.is_empty()).map(str::to_owned), "counting the vCPUs in use (DescribeInstances)")? {
            Some(t) => token = Some(t),
            None => return Ok(used),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::types::{CpuOptions, InstanceType};

    #[test]
    fn each_catalog_gpu_type_maps_to_its_families_quota_on_demand_and_spot_and_none_in_a_reservation() {
        let cases = [
            ("p5.48xlarge", "L-417A185B", "L-7212CCBC", 192),
            ("p5e.48xlarge", "L-417A185B", "L-7212CCBC", 192),
            ("p5en.48xlarge", "L-417A185B", "L-7212CCBC", 192),
            ("p6-b200.48xlarge", "L-417A185B", "L-7212CCBC", 192),
            ("p6-b300.48xlarge", "L-417A185B", "L-7212CCBC", 192),
            ("g6e.48xlarge", "L-DB2E81BA", "L-3819A6DF", 192),
            ("g6.xlarge", "L-DB2E81BA", "L-3819A6DF", 4),
            ("g5.xlarge", "L-DB2E81BA", "L-3819A6DF", 4),
        ];
        for (t, on_demand, spot, n) in cases {
            assert!(crate::catalog::find_sku(Cloud::Aws, t).is_some(), "{t} is in the catalog");
            assert_eq!(ec2_quota(t, CapacityType::OnDemand).map(|q| q.code), Some(on_demand), "{t}");
            assert_eq!(ec2_quota(t, CapacityType::FlexStart).map(|q| q.code), Some(on_demand), "{t}");
            assert_eq!(ec2_quota(t, CapacityType::Spot).map(|q| q.code), Some(spot), "{t}");
            assert_eq!(ec2_quota(t, CapacityType::Reservation), None, "{t}");
            assert_eq!(ec2_quota(t, CapacityType::CapacityBlock), None, "{t}");
            assert_eq!(vcpus(t), Some(n), "{t}");
        }
        // UltraServer-only: bought as Capacity Blocks, never drawn from a quota.
        assert_eq!(ec2_quota("p6e-gb200.36xlarge", CapacityType::OnDemand), None);
        assert_eq!(ec2_quota("m5.large", CapacityType::OnDemand), None);
        // Every AWS catalog node type is in the table (a new one added without its quota fails here).
        for sku in crate::catalog::skus(Cloud::Aws) {
            assert!(
                cases.iter().any(|c| c.0 == sku.name) || super::super::ultraserver_type(sku).is_some(),
                "{} has no quota case",
                sku.name
            );
        }
    }

    #[test]
    fn the_request_names_the_quota_code_and_region() {
        let r = request("L-417A185B", "us-east-1");
        assert!(
            r.contains("aws service-quotas request-service-quota-increase --region us-east-1 --service-code ec2 --quota-code L-417A185B"),
            "{r}"
        );
        assert!(r.contains("servicequotas/home/services/ec2/quotas/L-417A185B"), "{r}");
    }

    #[test]
    fn usage_counts_cpu_options_where_given_and_the_table_elsewhere_and_spot_apart() {
        let od = Instance::builder().instance_type(InstanceType::from("p5.48xlarge")).build();
        let trimmed = Instance::builder()
            .instance_type(InstanceType::from("p5.48xlarge"))
            .cpu_options(CpuOptions::builder().core_count(48).threads_per_core(1).build())
            .build();
        let spot =
            Instance::builder().instance_type(InstanceType::from("p5.48xlarge")).instance_lifecycle(InstanceLifecycleType::Spot).build();
        let block = Instance::builder()
            .instance_type(InstanceType::from("p5.48xlarge"))
            .instance_lifecycle(InstanceLifecycleType::CapacityBlock)
            .build();
        assert_eq!(instance_vcpus(&od), 192);
        assert_eq!(instance_vcpus(&trimmed), 48);
        // A negative count made a huge u64 whose product overflowed (a panic in a debug build): the
        // table's figure stands instead.
        let odd = |cores: i32, threads: i32| {
            Instance::builder()
                .instance_type(InstanceType::from("p5.48xlarge"))
                .cpu_options(CpuOptions::builder().core_count(cores).threads_per_core(threads).build())
                .build()
        };
        assert_eq!(instance_vcpus(&odd(-1, 2)), 192);
        crate::fuzz::check("instance_vcpus", (proptest::prelude::any::<i32>(), proptest::prelude::any::<i32>()), |(c, t)| {
            let _ = instance_vcpus(&odd(c, t));
            Ok(())
        });
        assert!(counts(&ON_DEMAND_P, &od) && !counts(&ON_DEMAND_P, &spot) && !counts(&ON_DEMAND_P, &block));
        assert!(counts(&SPOT_P, &spot) && !counts(&SPOT_P, &od));
    }
}
