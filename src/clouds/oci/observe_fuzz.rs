//! The OCI observe paths fed answers mutated from ones recorded from the emulator (#50): each list a
//! cluster's or a fabric's read makes gets an answer mutated, grown, emptied or garbled, under odd
//! statuses and hostile `opc-next-page` headers; the read gives what it found or an error naming the
//! list, never a panic or a hang.

use crate::catalog::Cloud;
use crate::clouds::oci::api::{Oci, Service};
use crate::clouds::oci::cluster::{self, Location};
use crate::clouds::oci::fabric;
use crate::framework::Context;
use crate::fuzz::{check_served, names_the_call, recorded, served};
use crate::model::{FabricSpec, Network, Placement};
use crate::ownership::Census;

/// The headers OCI answers that the client reads.
const HEADERS: &[&str] = &["opc-next-page", "opc-request-id", "opc-work-request-id", "etag"];
const COMPARTMENT: &str = "ocid1.compartment.oc1..c";

fn ctx() -> Context {
    Context::new(tokio_util::sync::CancellationToken::new(), None)
}

#[test]
fn any_answer_to_a_cluster_read_gives_its_nodes_or_an_error_naming_the_list() {
    let routes = vec![
        ("/instances?", served(recorded("oci-instances.json"), HEADERS)),
        ("/vnicAttachments?", served(recorded("oci-vnics.json"), HEADERS)),
        ("/privateIps?", served(recorded("oci-ips.json"), HEADERS)),
    ];
    let oci = Oci::local("http://127.0.0.1:1");
    check_served("oci cluster observe", routes, |base| {
        let oci = oci.at(&base);
        async move {
            let at = Location { compartment: COMPARTMENT, zone: "AD-1", name: "c", placement: Placement::Cluster, per_domain: None };
            let ctx = ctx();
            let result = match cluster::observe(&ctx, &oci, &at, &Census::adopting()).await {
                Ok(nodes) => cluster::addresses(&ctx, &oci, &at, &nodes).await.map(|_| ()),
                Err(e) => Err(e),
            };
            result.or_else(|e| names_the_call(&e.message, &["listing instances", "listing vnicAttachments", "listing privateIps"]))
        }
    });
}

#[test]
fn any_answer_to_a_fabric_read_gives_its_pieces_or_an_error_naming_the_list() {
    let spec = FabricSpec {
        name: "f".into(),
        cloud: Cloud::Oci,
        region: "r".into(),
        zone: Some("AD-1".into()),
        sku: crate::catalog::find_sku(Cloud::Oci, "BM.GPU.H100.8").expect("the H100 shape"),
        network: Network::Create { cidr: "10.0.0.0/16".into() },
        placement: Placement::Cluster,
        max_distance: None,
        resource_group: None,
        compartment_id: Some(COMPARTMENT.into()),
        tags: Default::default(),
    };
    let routes = vec![
        ("/securityRules?", served(recorded("oci-rules.json"), HEADERS)),
        ("/networkSecurityGroups?", served(recorded("oci-nsgs.json"), HEADERS)),
        ("/vcns?", served(recorded("oci-vcns.json"), HEADERS)),
        ("/subnets?", served(recorded("oci-subnets.json"), HEADERS)),
        ("/computeClusters?", served(recorded("oci-ccs.json"), HEADERS)),
    ];
    let lists = ["listing vcns", "listing subnets", "listing networkSecurityGroups", "listing computeClusters"];
    let oci = Oci::local("http://127.0.0.1:1");
    check_served("oci fabric observe", routes, |base| {
        let (oci, spec) = (oci.at(&base), spec.clone());
        async move {
            match fabric::observe(&ctx(), &oci, &spec, COMPARTMENT, &Census::adopting()).await {
                Ok(_) => Ok(()),
                Err(e) => names_the_call(&e.message, &lists),
            }
        }
    });
}

/// Found by the fuzz above: a list refused without an answer to word (a refused signature, a redirect
/// that loops) did not say which list failed.
#[tokio::test]
async fn a_list_that_ends_without_an_answer_names_the_list() {
    let base = crate::fuzz::serve(|line| {
        if line.contains("/vcns?") {
            (401, vec![], "{}".to_owned())
        } else {
            (301, vec![("location".to_owned(), "?again=1".to_owned())], String::new())
        }
    })
    .await;
    let oci = Oci::local(&base);
    let e = oci.list(&ctx(), Service::Core, "vcns", "compartmentId=c").await.expect_err("a refused signature is an error");
    assert!(e.message.starts_with("listing vcns: OCI refused the request's signature"), "{e}");
    let e = oci.list(&ctx(), Service::Core, "instances", "compartmentId=c").await.expect_err("a redirect loop is an error");
    assert!(e.message.starts_with("listing instances: "), "{e}");
    let e = oci.get(&ctx(), Service::Core, "/instances/x").await.expect_err("a redirect loop is an error");
    assert!(e.message.starts_with("reading /instances/x: "), "{e}");
}

/// Found by the fuzz above: an error answer that was a whole list was quoted whole in the error.
#[tokio::test]
async fn an_error_quotes_at_most_a_thousand_bytes_of_the_answer() {
    let instances = recorded("oci-instances.json");
    let many = serde_json::Value::Array(vec![instances[0].clone(); 200]).to_string();
    let base = crate::fuzz::serve(move |_| (400, vec![], many.clone())).await;
    let e = Oci::local(&base).list(&ctx(), Service::Core, "instances", "compartmentId=c").await.expect_err("a 400 is an error");
    assert!(e.message.len() < 1200 && e.message.contains("bytes in all)"), "{} bytes: {e}", e.message.len());
}
