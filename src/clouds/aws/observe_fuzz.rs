//! The EC2 observe path through the typed SDK (its query-protocol XML deserializer) fed answers mutated
//! from the DescribeInstances answer recorded from the emulator (moto) (#50): the cluster's nodes or an
//! error naming the call, never a panic or a hang.

use crate::clouds::aws::{api, cluster};
use crate::fuzz::{check_served, names_the_call, served_xml};
use crate::ownership::Census;

#[test]
fn any_answer_to_the_node_list_gives_the_nodes_or_an_error_naming_the_call() {
    let path = format!("{}/tests/fixtures/answers/aws-describe-instances.xml", env!("CARGO_MANIFEST_DIR"));
    let recorded = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let routes = vec![("POST / ", served_xml(&recorded))];
    let made: std::sync::Mutex<Option<api::Aws>> = Default::default();
    check_served("aws cluster nodes", routes, |base| {
        let (made, cached) = (&made, made.lock().unwrap().clone());
        async move {
            let aws = match cached {
                Some(aws) => aws,
                None => {
                    let aws = api::local(&base).await;
                    made.lock().unwrap().insert(aws).clone()
                }
            };
            match cluster::nodes(&aws, "c", &Census::adopting()).await {
                Ok(_) => Ok(()),
                Err(e) => names_the_call(&e.message, &["listing the cluster's nodes"]),
            }
        }
    });
}

/// Found by the fuzz above: an answer the SDK could not read as an error (a 301, a 400 without a code) was
/// shown whole, raw response and body, in the error: kilobytes of a diagnostic.
#[tokio::test]
async fn an_unreadable_error_quotes_at_most_a_thousand_bytes_of_the_answer() {
    let path = format!("{}/tests/fixtures/answers/aws-describe-instances.xml", env!("CARGO_MANIFEST_DIR"));
    let recorded = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let base = crate::fuzz::serve(move |_| (301, vec![], recorded.clone())).await;
    let aws = api::local(&base).await;
    let e = cluster::nodes(&aws, "c", &Census::adopting()).await.expect_err("a 301 is an error");
    assert!(e.message.starts_with("listing the cluster's nodes: ") && e.message.len() < 1200, "{} bytes: {e}", e.message.len());
}
