//! The Azure observe paths fed ARM answers mutated from ones recorded from the emulator (#50): each call a
//! cluster's or a fabric's read makes gets an answer mutated, grown, emptied or garbled, under odd
//! statuses; the read gives what it found or an error naming the call, never a panic or a hang.

use crate::clouds::azure::api::Arm;
use crate::clouds::azure::fabric::Ids;
use crate::clouds::azure::{cluster, fabric};
use crate::framework::{Context, Value};
use crate::fuzz::{check_served, names_the_call, recorded, served};
use crate::ownership::Census;

/// The headers ARM answers that the client reads.
const HEADERS: &[&str] = &["retry-after", "x-ms-request-id", "azure-asyncoperation"];
const GROUP: &str = "/subscriptions/s/resourceGroups/rg";

fn ctx() -> Context {
    Context::new(tokio_util::sync::CancellationToken::new(), None)
}

/// An import's census: every piece with the names is read (a refresh's would leave out those of another
/// owner, reading less of them).
fn census() -> Census {
    Census::adopting()
}

/// What a failed read may name: the read or the list it was.
const CALLS: &[&str] = &["reading /subscriptions/s/", "listing /subscriptions/s/"];

#[test]
fn any_answer_to_a_cluster_read_gives_its_scale_sets_or_an_error_naming_the_call() {
    let routes = vec![
        ("c-0/virtualMachines?", served(recorded("azure-vms.json"), HEADERS)),
        ("c-0/networkInterfaces?", served(recorded("azure-nics.json"), HEADERS)),
        ("virtualMachineScaleSets/c-0?", served(recorded("azure-scale-set.json"), HEADERS)),
    ];
    check_served("azure cluster observe", routes, |base| async move {
        let arm = Arm::local(&base);
        match cluster::observe(&ctx(), &arm, "rg", "c", 1, &census()).await {
            Ok(live) => {
                let _ = cluster::nodes("c", &[2], &live, &Value::Null);
                Ok(())
            }
            Err(e) => names_the_call(&e.message, CALLS),
        }
    });
}

#[test]
fn any_answer_to_a_fabric_read_gives_its_pieces_or_an_error_naming_the_call() {
    let network = format!("{GROUP}/providers/Microsoft.Network");
    let ids = move || Ids {
        group: GROUP.into(),
        group_is_ours: true,
        vnet: format!("{network}/virtualNetworks/f-vnet"),
        subnet: format!("{network}/virtualNetworks/f-vnet/subnets/f-subnet"),
        network_is_ours: true,
        nsg: format!("{network}/networkSecurityGroups/f-nsg"),
        ppg: Some(format!("{GROUP}/providers/Microsoft.Compute/proximityPlacementGroups/f-ppg")),
    };
    let routes = vec![
        ("subnets/f-subnet?", served(recorded("azure-subnet.json"), HEADERS)),
        ("virtualNetworks/f-vnet?", served(recorded("azure-vnet.json"), HEADERS)),
        ("networkSecurityGroups/f-nsg?", served(recorded("azure-nsg.json"), HEADERS)),
        ("proximityPlacementGroups/f-ppg?", served(recorded("azure-ppg.json"), HEADERS)),
        ("resourceGroups/rg?", served(recorded("azure-group.json"), HEADERS)),
    ];
    check_served("azure fabric observe", routes, |base| {
        let ids = ids();
        async move {
            let arm = Arm::local(&base);
            match fabric::observe(&ctx(), &arm, &ids, &census()).await {
                Ok(live) => {
                    let _ = (live.associated(&ids), fabric::present(&live, &ids)("subnet"));
                    Ok(())
                }
                Err(e) => names_the_call(&e.message, CALLS),
            }
        }
    });
}

/// Found by the fuzz above: a read that ended without an answer to word (a redirect that loops, a
/// nextLink to another host) said only "calling Azure Resource Manager", not which read failed.
#[tokio::test]
async fn a_read_that_ends_without_an_answer_names_the_read() {
    let base = crate::fuzz::serve(|line| {
        if line.contains("/list") {
            (200, vec![], r#"{"value": [], "nextLink": "https://attacker.example/list?page=2"}"#.to_owned())
        } else {
            (301, vec![("location".to_owned(), "?again=1".to_owned())], String::new())
        }
    })
    .await;
    let arm = Arm::local(&base);
    let set = format!("{GROUP}/providers/Microsoft.Compute/virtualMachineScaleSets/c-0");
    let e = arm.get(&ctx(), &set, "1").await.expect_err("a redirect loop is an error");
    assert!(e.message.starts_with(&format!("reading {set}: ")), "{e}");
    let e = arm.list(&ctx(), &format!("{set}/list"), "1").await.expect_err("a link to another host is not followed");
    assert!(e.message.starts_with(&format!("listing {set}/list: ")) && e.message.contains("was not followed"), "{e}");
}

/// Found by the fuzz above: an error answer that was a whole list (or a proxy's page) was quoted whole in
/// the error, a diagnostic tens of kilobytes long.
#[tokio::test]
async fn an_error_quotes_at_most_a_thousand_bytes_of_the_answer() {
    let vms = crate::fuzz::recorded("azure-vms.json");
    let many = serde_json::json!({"value": vec![vms["value"][0].clone(); 200]}).to_string();
    let base = crate::fuzz::serve(move |_| (409, vec![], many.clone())).await;
    let set = format!("{GROUP}/providers/Microsoft.Compute/virtualMachineScaleSets/c-0");
    let e = Arm::local(&base).get(&ctx(), &set, "1").await.expect_err("a 409 is an error");
    assert!(e.message.len() < 1200 && e.message.contains("bytes in all)"), "{} bytes: {e}", e.message.len());
}
