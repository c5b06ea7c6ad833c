//! Each emulator's instance metadata service, read as a booted host reads it: `POST /_admin/metadata` opens
//! a listener on 127.0.0.1 for one instance, and a plain HTTP client asks it what a host at 169.254.169.254
//! would ask. Each rule the clouds document is a test of its own (see the Semantics table of
//! notes/api-conformance.md).

mod common;

use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A plain HTTP client, as a host's curl or cloud-init is (no proxy).
fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(30)).build().unwrap()
}

/// (status, headers, body) of one request to a listener.
async fn ask(method: &str, url: &str, headers: &[(&str, &str)]) -> Result<(u16, reqwest::header::HeaderMap, String), reqwest::Error> {
    let mut req = http().request(reqwest::Method::from_bytes(method.as_bytes()).unwrap(), url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await?;
    let status = resp.status().as_u16();
    let head = resp.headers().clone();
    Ok((status, head, resp.text().await?))
}

async fn get(url: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let (status, _, body) = ask("GET", url, headers).await.unwrap_or_else(|e| panic!("GET {url}: {e}"));
    (status, body)
}

/// POSTs an admin route over plain HTTP: (status, JSON answer).
async fn admin_post(endpoint: &str, route: &str, body: Value) -> (u16, Value) {
    let resp = http().post(format!("{endpoint}/_admin/{route}")).json(&body).send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

mod aws {
    use super::*;
    use aws_sdk_ec2::types::{
        HttpTokensState, IamInstanceProfileSpecification, InstanceMetadataEndpointState, InstanceMetadataOptionsRequest,
        InstanceMetadataTagsState, LaunchTemplateHttpTokensState, LaunchTemplateInstanceMetadataOptionsRequest,
        LaunchTemplateInstanceMetadataTagsState, LaunchTemplateSpecification, Placement, PlacementStrategy, RequestLaunchTemplateData,
        ResourceType, Tag, TagSpecification,
    };
    use base64::Engine;
    use common::{aws, ec2};

    const AMI: &str = "ami-12c6146b";

    /// A subnet of its own in `zone` (a VPC 10.<n>.0.0/16, the subnet 10.<n>.1.0/24).
    async fn subnet(client: &aws_sdk_ec2::Client, zone: &str, n: u8) -> (String, String) {
        let vpc = client.create_vpc().cidr_block(format!("10.{n}.0.0/16")).send().await.unwrap().vpc.unwrap().vpc_id.unwrap();
        let subnet = client
            .create_subnet()
            .vpc_id(&vpc)
            .cidr_block(format!("10.{n}.1.0/24"))
            .availability_zone(zone)
            .send()
            .await
            .unwrap()
            .subnet
            .unwrap()
            .subnet_id
            .unwrap();
        (vpc, subnet)
    }

    fn tags(pairs: &[(&str, &str)]) -> TagSpecification {
        let mut spec = TagSpecification::builder().resource_type(ResourceType::Instance);
        for (k, v) in pairs {
            spec = spec.tags(Tag::builder().key(*k).value(*v).build());
        }
        spec.build()
    }

    /// The listener's base URL for an instance, and the admin route's whole answer.
    fn listen(instance: &str) -> (String, Value) {
        let out = common::admin(aws(), "POST", "metadata", Some(json!({"instance": instance})));
        (format!("http://127.0.0.1:{}", out["port"]), out)
    }

    async fn token(base: &str) -> String {
        let (status, _, token) =
            ask("PUT", &format!("{base}/latest/api/token"), &[("X-aws-ec2-metadata-token-ttl-seconds", "300")]).await.unwrap();
        assert_eq!(status, 200, "{token}");
        token
    }

    #[tokio::test]
    async fn tags_are_in_the_metadata_only_when_instance_metadata_tags_is_enabled() {
        let client = ec2(aws(), "eu-west-1");
        let (_, subnet) = subnet(&client, "eu-west-1a", 41).await;
        let launch = |allow: bool| {
            let mut options = InstanceMetadataOptionsRequest::builder().http_tokens(HttpTokensState::Required);
            if allow {
                options = options.instance_metadata_tags(InstanceMetadataTagsState::Enabled);
            }
            client
                .run_instances()
                .image_id(AMI)
                .min_count(1)
                .max_count(1)
                .subnet_id(&subnet)
                .metadata_options(options.build())
                .tag_specifications(tags(&[("Name", "train-ctl-0"), ("hpc:slurm-config", "r7 2")]))
                .send()
        };
        let allowed = launch(true).await.unwrap().instances()[0].instance_id().unwrap().to_owned();
        let withheld = launch(false).await.unwrap().instances()[0].instance_id().unwrap().to_owned();

        // DescribeInstances reports what the launch asked for.
        let described = client.describe_instances().instance_ids(&allowed).instance_ids(&withheld).send().await.unwrap();
        let options: Vec<_> = described
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .map(|i| (i.instance_id().unwrap().to_owned(), i.metadata_options().unwrap().instance_metadata_tags().cloned()))
            .collect();
        assert!(options.contains(&(allowed.clone(), Some(InstanceMetadataTagsState::Enabled))), "{options:?}");
        assert!(options.contains(&(withheld.clone(), Some(InstanceMetadataTagsState::Disabled))), "{options:?}");

        let (base, _) = listen(&allowed);
        let t = token(&base).await;
        let auth = [("X-aws-ec2-metadata-token", t.as_str())];
        let (_, listing) = get(&format!("{base}/latest/meta-data/"), &auth).await;
        assert!(listing.lines().any(|l| l == "tags/"), "{listing}");
        let (status, keys) = get(&format!("{base}/latest/meta-data/tags/instance/"), &auth).await;
        assert_eq!(status, 200);
        assert!(keys.lines().any(|k| k == "Name") && keys.lines().any(|k| k == "hpc:slurm-config"), "{keys}");
        assert_eq!(get(&format!("{base}/latest/meta-data/tags/instance/Name"), &auth).await, (200, "train-ctl-0".into()));
        assert_eq!(get(&format!("{base}/latest/meta-data/tags/instance/hpc:slurm-config"), &auth).await, (200, "r7 2".into()));
        // A tag written later shows at once; tags came in the 2021-03-23 build, older ones do not have them.
        client.create_tags().resources(&allowed).tags(Tag::builder().key("hpc:selfcheck").value("ok").build()).send().await.unwrap();
        assert_eq!(get(&format!("{base}/latest/meta-data/tags/instance/hpc:selfcheck"), &auth).await, (200, "ok".into()));
        assert_eq!(get(&format!("{base}/2021-03-23/meta-data/tags/instance/Name"), &auth).await.0, 200);
        assert_eq!(get(&format!("{base}/2018-09-24/meta-data/tags/instance/Name"), &auth).await.0, 404);

        let (other, _) = listen(&withheld);
        let t2 = token(&other).await;
        let auth2 = [("X-aws-ec2-metadata-token", t2.as_str())];
        let (_, listing) = get(&format!("{other}/latest/meta-data/"), &auth2).await;
        assert!(!listing.lines().any(|l| l.starts_with("tags")), "{listing}");
        assert_eq!(get(&format!("{other}/latest/meta-data/tags/instance/"), &auth2).await.0, 404);
        assert_eq!(get(&format!("{other}/latest/meta-data/tags/instance/Name"), &auth2).await.0, 404);
        // Allowed later (ModifyInstanceMetadataOptions), without touching the other options.
        client
            .modify_instance_metadata_options()
            .instance_id(&withheld)
            .instance_metadata_tags(InstanceMetadataTagsState::Enabled)
            .send()
            .await
            .unwrap();
        assert_eq!(get(&format!("{other}/latest/meta-data/tags/instance/Name"), &auth2).await, (200, "train-ctl-0".into()));
        assert_eq!(get(&format!("{other}/latest/meta-data/instance-id"), &[]).await.0, 401, "HttpTokens stays required");
    }

    #[tokio::test]
    async fn imds_v2_refuses_a_get_without_a_token_when_tokens_are_required() {
        let client = ec2(aws(), "eu-west-2");
        let (_, subnet) = subnet(&client, "eu-west-2a", 42).await;
        let run = |tokens: HttpTokensState| {
            client
                .run_instances()
                .image_id(AMI)
                .min_count(1)
                .max_count(1)
                .subnet_id(&subnet)
                .metadata_options(InstanceMetadataOptionsRequest::builder().http_tokens(tokens).build())
                .send()
        };
        let required = run(HttpTokensState::Required).await.unwrap().instances()[0].instance_id().unwrap().to_owned();
        let optional = run(HttpTokensState::Optional).await.unwrap().instances()[0].instance_id().unwrap().to_owned();
        let (base, _) = listen(&required);
        let id_url = format!("{base}/latest/meta-data/instance-id");
        assert_eq!(get(&id_url, &[]).await.0, 401, "IMDSv1 is off when tokens are required");

        // The token's TTL is 1 to 21600 seconds; a forwarded PUT, or one to a version's own path, is refused.
        let put = |ttl: Option<&'static str>, extra: Option<(&'static str, &'static str)>, path: &'static str| {
            let base = base.clone();
            async move {
                let mut headers: Vec<(&str, &str)> = ttl.map(|t| ("X-aws-ec2-metadata-token-ttl-seconds", t)).into_iter().collect();
                headers.extend(extra);
                ask("PUT", &format!("{base}{path}"), &headers).await.unwrap()
            }
        };
        assert_eq!(put(None, None, "/latest/api/token").await.0, 400);
        assert_eq!(put(Some("0"), None, "/latest/api/token").await.0, 400);
        assert_eq!(put(Some("21601"), None, "/latest/api/token").await.0, 400);
        assert_eq!(put(Some("60"), Some(("X-Forwarded-For", "203.0.113.7")), "/latest/api/token").await.0, 403);
        assert_eq!(put(Some("60"), None, "/2021-03-23/api/token").await.0, 403);
        let (status, head, good) = put(Some("21600"), None, "/latest/api/token").await;
        assert_eq!(status, 200);
        assert_eq!(head["x-aws-ec2-metadata-token-ttl-seconds"], "21600");
        assert_eq!(get(&id_url, &[("X-aws-ec2-metadata-token", &good)]).await, (200, required.clone()));
        assert_eq!(get(&id_url, &[("X-aws-ec2-metadata-token", "not-a-token")]).await.0, 401);
        // A token ends with its TTL.
        let (_, _, short) = put(Some("1"), None, "/latest/api/token").await;
        assert_eq!(get(&id_url, &[("X-aws-ec2-metadata-token", &short)]).await.0, 200);
        tokio::time::sleep(Duration::from_millis(1300)).await;
        assert_eq!(get(&id_url, &[("X-aws-ec2-metadata-token", &short)]).await.0, 401);
        // A token is this instance's: another instance's listener does not know it.
        let (other, _) = listen(&optional);
        assert_eq!(get(&format!("{other}/latest/meta-data/instance-id"), &[("X-aws-ec2-metadata-token", &good)]).await.0, 401);
        // Tokens optional: IMDSv1 answers.
        assert_eq!(get(&format!("{other}/latest/meta-data/instance-id"), &[]).await, (200, optional.clone()));
    }

    #[tokio::test]
    async fn a_launch_templates_metadata_options_and_user_data_reach_the_instance() {
        let client = ec2(aws(), "eu-north-1");
        let (_, subnet) = subnet(&client, "eu-north-1a", 43).await;
        let script = "#!/bin/sh\necho hpc-node\n";
        let data = RequestLaunchTemplateData::builder()
            .user_data(base64::engine::general_purpose::STANDARD.encode(script))
            .metadata_options(
                LaunchTemplateInstanceMetadataOptionsRequest::builder()
                    .http_tokens(LaunchTemplateHttpTokensState::Required)
                    .instance_metadata_tags(LaunchTemplateInstanceMetadataTagsState::Enabled)
                    .build(),
            )
            .build();
        client.create_launch_template().launch_template_name("imds-lt").launch_template_data(data).send().await.unwrap();
        let run = client
            .run_instances()
            .min_count(1)
            .max_count(1)
            .image_id(AMI)
            .subnet_id(&subnet)
            .launch_template(LaunchTemplateSpecification::builder().launch_template_name("imds-lt").build())
            .tag_specifications(tags(&[("Name", "lt-node")]))
            .send()
            .await
            .unwrap();
        let id = run.instances()[0].instance_id().unwrap().to_owned();
        let options = client.describe_instances().instance_ids(&id).send().await.unwrap().reservations()[0].instances()[0]
            .metadata_options()
            .cloned()
            .unwrap();
        assert_eq!(options.http_tokens(), Some(&HttpTokensState::Required), "{options:?}");
        assert_eq!(options.instance_metadata_tags(), Some(&InstanceMetadataTagsState::Enabled), "{options:?}");
        let (base, _) = listen(&id);
        assert_eq!(get(&format!("{base}/latest/user-data"), &[]).await.0, 401, "the template's HttpTokens");
        let t = token(&base).await;
        let auth = [("X-aws-ec2-metadata-token", t.as_str())];
        assert_eq!(get(&format!("{base}/latest/user-data"), &auth).await, (200, script.to_owned()));
        assert_eq!(get(&format!("{base}/latest/meta-data/tags/instance/Name"), &auth).await, (200, "lt-node".into()));

        // Without user data, `user-data` is 404 and not listed.
        let plain = client.run_instances().image_id(AMI).min_count(1).max_count(1).subnet_id(&subnet).send().await.unwrap();
        let (base, _) = listen(plain.instances()[0].instance_id().unwrap());
        assert_eq!(get(&format!("{base}/latest/user-data"), &[]).await.0, 404);
        assert!(!get(&format!("{base}/latest/"), &[]).await.1.lines().any(|l| l == "user-data"));
    }

    /// An IAM call to moto (which routes by the credential scope and does not check signatures).
    async fn iam(params: &[(&str, &str)]) {
        let mut form: Vec<(&str, &str)> = vec![("Version", "2010-05-08")];
        form.extend_from_slice(params);
        let body: String = form
            .iter()
            .map(|(k, v)| format!("{k}={}", v.replace('%', "%25").replace('&', "%26").replace('=', "%3D")))
            .collect::<Vec<_>>()
            .join("&");
        let resp = http()
            .post(aws())
            .header("content-type", "application/x-www-form-urlencoded")
            .header(
                "authorization",
                "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/iam/aws4_request, SignedHeaders=host, Signature=0",
            )
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200, "{params:?}: {}", resp.text().await.unwrap());
    }

    #[tokio::test]
    async fn the_metadata_tree_answers_what_cloud_inits_ec2_datasource_reads() {
        let client = ec2(aws(), "ap-south-1");
        let (vpc, subnet) = subnet(&client, "ap-south-1a", 44).await;
        client.create_key_pair().key_name("imds-key").send().await.unwrap();
        client.create_placement_group().group_name("imds-pg").strategy(PlacementStrategy::Cluster).send().await.unwrap();
        // The instance profile is made through moto's IAM, which the conformance judge (EC2's and FSx's
        // definitions) does not know: unjudged for these three calls.
        common::admin(aws(), "POST", "conformance", Some(json!({"judge": false})));
        iam(&[("Action", "CreateRole"), ("RoleName", "imds-node"), ("AssumeRolePolicyDocument", "{}")]).await;
        iam(&[("Action", "CreateInstanceProfile"), ("InstanceProfileName", "imds-profile")]).await;
        iam(&[("Action", "AddRoleToInstanceProfile"), ("InstanceProfileName", "imds-profile"), ("RoleName", "imds-node")]).await;
        common::admin(aws(), "POST", "conformance", Some(json!({"judge": true})));
        let run = client
            .run_instances()
            .image_id(AMI)
            .min_count(1)
            .max_count(1)
            .subnet_id(&subnet)
            .key_name("imds-key")
            .placement(Placement::builder().group_name("imds-pg").build())
            .iam_instance_profile(IamInstanceProfileSpecification::builder().name("imds-profile").build())
            .send()
            .await
            .unwrap();
        let instance = run.instances()[0].clone();
        let id = instance.instance_id().unwrap().to_owned();
        let (base, facts) = listen(&id);
        let nic = &instance.network_interfaces()[0];
        assert_eq!(facts["private_ip"], instance.private_ip_address().unwrap());
        assert_eq!(facts["mac"], nic.mac_address().unwrap());
        let g = |path: String| {
            let url = format!("{base}{path}");
            async move { get(&url, &[]).await }
        };

        let (_, versions) = g("/".into()).await;
        for v in ["2009-04-04", "2016-09-02", "2018-09-24", "2021-03-23", "latest"] {
            assert!(versions.lines().any(|l| l == v), "{v}: {versions}");
        }
        assert_eq!(g("/2021-03-23/meta-data/instance-id".into()).await, (200, id.clone()));
        let (_, listing) = g("/2021-03-23/meta-data/".into()).await;
        for entry in
            ["ami-id", "hostname", "instance-type", "local-ipv4", "mac", "network/", "placement/", "public-keys/", "iam/", "services/"]
        {
            assert!(listing.lines().any(|l| l == entry), "{entry} in {listing}");
        }
        let mac = nic.mac_address().unwrap();
        let macs = format!("/latest/meta-data/network/interfaces/macs/{mac}/");
        let (_, fields) = g(macs.clone()).await;
        for field in [
            "device-number",
            "interface-id",
            "local-ipv4s",
            "mac",
            "security-group-ids",
            "subnet-id",
            "subnet-ipv4-cidr-block",
            "vpc-id",
            "vpc-ipv4-cidr-block",
        ] {
            assert!(fields.lines().any(|l| l == field), "{field} in {fields}");
        }
        assert_eq!(g(format!("{macs}subnet-id")).await.1, subnet);
        assert_eq!(g(format!("{macs}vpc-id")).await.1, vpc);
        assert_eq!(g(format!("{macs}interface-id")).await.1, nic.network_interface_id().unwrap());
        assert_eq!(g(format!("{macs}subnet-ipv4-cidr-block")).await.1, "10.44.1.0/24");
        assert_eq!(g("/latest/meta-data/placement/availability-zone".into()).await.1, "ap-south-1a");
        assert_eq!(g("/latest/meta-data/placement/region".into()).await.1, "ap-south-1");
        assert_eq!(g("/latest/meta-data/placement/group-name".into()).await.1, "imds-pg");
        assert_eq!(g("/latest/meta-data/public-keys/".into()).await.1, "0=imds-key");
        assert!(g("/latest/meta-data/public-keys/0/openssh-key".into()).await.1.starts_with("ssh-rsa "));
        assert_eq!(g("/latest/meta-data/services/partition".into()).await.1, "aws");
        let (_, roles) = g("/latest/meta-data/iam/security-credentials/".into()).await;
        assert_eq!(roles, "imds-node");
        let credentials: Value = serde_json::from_str(&g("/latest/meta-data/iam/security-credentials/imds-node".into()).await.1).unwrap();
        assert_eq!(credentials["Code"], "Success");
        assert!(
            credentials["AccessKeyId"].as_str().is_some_and(|k| k.starts_with("ASIA")) && credentials["Token"].is_string(),
            "{credentials}"
        );
        let info: Value = serde_json::from_str(&g("/latest/meta-data/iam/info".into()).await.1).unwrap();
        assert!(info["InstanceProfileArn"].as_str().unwrap().ends_with("instance-profile/imds-profile"), "{info}");
        let document: Value = serde_json::from_str(&g("/2021-03-23/dynamic/instance-identity/document".into()).await.1).unwrap();
        assert_eq!((document["instanceId"].as_str(), document["region"].as_str()), (Some(id.as_str()), Some("ap-south-1")));
        assert_eq!(document["privateIp"], instance.private_ip_address().unwrap());
        assert_eq!(g("/latest/meta-data/no-such-thing".into()).await.0, 404);

        // Without an instance profile there is no `iam/`.
        let bare = client.run_instances().image_id(AMI).min_count(1).max_count(1).subnet_id(&subnet).send().await.unwrap();
        let (bare, _) = listen(bare.instances()[0].instance_id().unwrap());
        assert_eq!(get(&format!("{bare}/latest/meta-data/iam/info"), &[]).await.0, 404);
        assert!(!get(&format!("{bare}/latest/meta-data/"), &[]).await.1.lines().any(|l| l == "iam/"));
    }

    #[tokio::test]
    async fn a_disabled_endpoint_answers_403_and_a_terminated_instance_is_unreachable() {
        let client = ec2(aws(), "sa-east-1");
        let (_, subnet) = subnet(&client, "sa-east-1a", 45).await;
        let off = client
            .run_instances()
            .image_id(AMI)
            .min_count(1)
            .max_count(1)
            .subnet_id(&subnet)
            .metadata_options(InstanceMetadataOptionsRequest::builder().http_endpoint(InstanceMetadataEndpointState::Disabled).build())
            .send()
            .await
            .unwrap();
        let (base, _) = listen(off.instances()[0].instance_id().unwrap());
        assert_eq!(get(&format!("{base}/latest/meta-data/"), &[]).await.0, 403);
        let (status, _, _) =
            ask("PUT", &format!("{base}/latest/api/token"), &[("X-aws-ec2-metadata-token-ttl-seconds", "60")]).await.unwrap();
        assert_eq!(status, 403);

        let on = client.run_instances().image_id(AMI).min_count(1).max_count(1).subnet_id(&subnet).send().await.unwrap();
        let id = on.instances()[0].instance_id().unwrap().to_owned();
        let (base, first) = listen(&id);
        assert_eq!(listen(&id).1["port"], first["port"], "asking again gives the same listener");
        assert_eq!(get(&format!("{base}/latest/meta-data/instance-id"), &[]).await, (200, id.clone()));
        client.terminate_instances().instance_ids(&id).send().await.unwrap();
        for _ in 0..2 {
            assert!(ask("GET", &format!("{base}/latest/meta-data/instance-id"), &[]).await.is_err(), "unreachable once terminated");
        }
        let (status, _) = hpc_emulators::harness::admin_raw(aws(), "POST", "metadata", Some(json!({"instance": "i-0000000000000dead"})));
        assert_eq!(status, 404);
    }
}

mod gcp {
    use super::*;
    use hpc_emulators::gcp;

    const P: &str = "imds-proj";
    const ZONE: &str = "us-central1-a";
    const FLAVOR: (&str, &str) = ("Metadata-Flavor", "Google");

    async fn compute(ep: &str, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("{ep}/compute/v1/projects/{P}/{path}");
        let req = http().request(reqwest::Method::from_bytes(method.as_bytes()).unwrap(), url);
        let resp = match body {
            Some(b) => req.json(&b).send().await.unwrap(),
            None => req.send().await.unwrap(),
        };
        let status = resp.status().as_u16();
        let out: Value = resp.json().await.unwrap();
        assert!(status == 200, "{method} {path}: {status} {out}");
        out
    }

    /// An instance in a subnet of 10.20.0.0/24, with metadata items, and a service account unless `sa` is false.
    async fn instance(ep: &str, name: &str, sa: bool) -> String {
        let mut body = json!({
            "name": name, "machineType": format!("zones/{ZONE}/machineTypes/a3-highgpu-8g"),
            "disks": [{"boot": true, "autoDelete": true, "initializeParams": {"sourceImage": "projects/debian-cloud/global/images/debian-12-bookworm-v20260101", "diskSizeGb": "50"}}],
            "networkInterfaces": [{"network": format!("projects/{P}/global/networks/imds-net"), "subnetwork": format!("projects/{P}/regions/us-central1/subnetworks/imds-sub")}],
            "metadata": {"items": [{"key": "hpc-slurm-config", "value": "rev-1 payload"}, {"key": "user-data", "value": "#cloud-config\n{}"}]},
            "tags": {"items": ["slurm", "controller"]},
        });
        if sa {
            body["serviceAccounts"] = json!([{"email": format!("node@{P}.iam.gserviceaccount.com"), "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}]);
        }
        compute(ep, "POST", &format!("zones/{ZONE}/instances"), Some(body)).await;
        format!("projects/{P}/zones/{ZONE}/instances/{name}")
    }

    async fn setup() -> gcp::Running {
        let emu = gcp::serve("127.0.0.1:0").await.unwrap();
        compute(&emu.endpoint, "POST", "global/networks", Some(json!({"name": "imds-net", "autoCreateSubnetworks": false}))).await;
        compute(
            &emu.endpoint,
            "POST",
            "regions/us-central1/subnetworks",
            Some(json!({"name": "imds-sub", "network": format!("projects/{P}/global/networks/imds-net"), "ipCidrRange": "10.20.0.0/24"})),
        )
        .await;
        emu
    }

    async fn listen(emu: &gcp::Running, instance: &str) -> (String, Value) {
        let (status, out) = admin_post(&emu.endpoint, "metadata", json!({"instance": instance})).await;
        assert_eq!(status, 200, "{out}");
        (format!("http://127.0.0.1:{}/computeMetadata/v1", out["port"]), out)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn gce_metadata_needs_the_flavor_header_and_refuses_forwarded_requests() {
        let emu = setup().await;
        let path = instance(&emu.endpoint, "flavor", true).await;
        let (base, _) = listen(&emu, &path).await;
        let (status, head, _) = ask("GET", &format!("{base}/instance/name"), &[]).await.unwrap();
        assert_eq!(status, 403, "no Metadata-Flavor");
        assert_eq!(head["metadata-flavor"], "Google");
        let (status, _, _) = ask("GET", &format!("{base}/instance/name"), &[FLAVOR, ("X-Forwarded-For", "10.0.0.9")]).await.unwrap();
        assert_eq!(status, 403, "X-Forwarded-For");
        let (status, head, name) = ask("GET", &format!("{base}/instance/name"), &[FLAVOR]).await.unwrap();
        assert_eq!((status, name.as_str()), (200, "flavor"));
        assert_eq!(head["metadata-flavor"], "Google");
        assert!(head.contains_key("etag"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn gce_serves_the_instance_its_attributes_and_recursive_json() {
        let emu = setup().await;
        let path = instance(&emu.endpoint, "ctl-0", true).await;
        let (base, facts) = listen(&emu, &path).await;
        let stored = compute(&emu.endpoint, "GET", &format!("zones/{ZONE}/instances/ctl-0"), None).await;
        let ip = stored["networkInterfaces"][0]["networkIP"].as_str().unwrap().to_owned();
        assert!(ip.starts_with("10.20.0."), "{ip}");
        assert_eq!(facts["private_ip"], ip);
        // The numeric id is accepted too, for the same listener.
        let (_, again) = admin_post(&emu.endpoint, "metadata", json!({"instance": stored["id"]})).await;
        assert_eq!(again["port"], facts["port"]);
        let g = |p: &str| {
            let url = format!("{base}/{p}");
            async move { get(&url, &[FLAVOR]).await }
        };
        let number = hpc_emulators::gcp::project_number(P);
        assert_eq!(g("instance/name").await, (200, "ctl-0".into()));
        assert_eq!(g("instance/id").await.1, stored["id"].as_str().unwrap());
        assert_eq!(g("instance/zone").await.1, format!("projects/{number}/zones/{ZONE}"));
        assert_eq!(g("instance/machine-type").await.1, format!("projects/{number}/machineTypes/a3-highgpu-8g"));
        assert_eq!(g("instance/hostname").await.1, format!("ctl-0.{ZONE}.c.{P}.internal"));
        assert_eq!(g("instance/image").await.1, "projects/debian-cloud/global/images/debian-12-bookworm-v20260101");
        assert_eq!(g("instance/network-interfaces/0/ip").await.1, ip);
        assert_eq!(g("instance/network-interfaces/0/network").await.1, format!("projects/{number}/networks/imds-net"));
        assert_eq!(g("instance/network-interfaces/0/gateway").await.1, "10.20.0.1");
        assert_eq!(g("instance/network-interfaces/0/mac").await.1, facts["mac"].as_str().unwrap());
        assert_eq!(g("instance/attributes/hpc-slurm-config").await, (200, "rev-1 payload".into()));
        assert_eq!(g("instance/attributes/no-such-key").await.0, 404);
        assert_eq!(serde_json::from_str::<Value>(&g("instance/tags").await.1).unwrap(), json!(["slurm", "controller"]));
        assert_eq!(g("project/project-id").await.1, P);
        assert_eq!(g("project/numeric-project-id").await.1, number);
        // Directory listings: subdirectories end in '/'.
        let (_, listing) = g("instance/").await;
        for entry in ["attributes/", "hostname", "id", "machine-type", "name", "network-interfaces/", "service-accounts/", "tags", "zone"] {
            assert!(listing.lines().any(|l| l == entry), "{entry}: {listing}");
        }
        assert_eq!(g("instance/attributes/").await.1, "hpc-slurm-config\nuser-data\n");
        // recursive=true: JSON with the camelCase keys; alt=text flattens it.
        let whole: Value = serde_json::from_str(&g("instance/?recursive=true").await.1).unwrap();
        assert_eq!(whole["networkInterfaces"][0]["ip"], ip);
        assert_eq!(whole["machineType"], format!("projects/{number}/machineTypes/a3-highgpu-8g"));
        assert_eq!(whole["attributes"]["hpc-slurm-config"], "rev-1 payload");
        assert_eq!(whole["serviceAccounts"]["default"]["email"], format!("node@{P}.iam.gserviceaccount.com"));
        let flat = g("instance/attributes/?recursive=true&alt=text").await.1;
        assert!(flat.lines().any(|l| l == "hpc-slurm-config rev-1 payload"), "{flat}");
        assert_eq!(g("instance/name?alt=json").await.1, "\"ctl-0\"");
        // The service account and its token; none without one.
        assert_eq!(g("instance/service-accounts/default/email").await.1, format!("node@{P}.iam.gserviceaccount.com"));
        let token: Value = serde_json::from_str(&g("instance/service-accounts/default/token").await.1).unwrap();
        assert_eq!(token["token_type"], "Bearer");
        assert!(token["access_token"].as_str().is_some_and(|t| !t.is_empty()) && token["expires_in"].as_u64().is_some(), "{token}");
        let bare = instance(&emu.endpoint, "no-sa", false).await;
        let (bare, _) = listen(&emu, &bare).await;
        assert_eq!(get(&format!("{bare}/instance/service-accounts/default/token"), &[FLAVOR]).await.0, 404);
        assert_eq!(get(&format!("{bare}/instance/service-accounts/"), &[FLAVOR]).await, (200, String::new()));
    }

    /// The instance's metadata fingerprint and items, and a setMetadata with one item changed.
    async fn set_attribute(ep: &str, name: &str, key: &str, value: &str) {
        let now = compute(ep, "GET", &format!("zones/{ZONE}/instances/{name}"), None).await;
        let mut items: Vec<Value> = now["metadata"]["items"].as_array().cloned().unwrap_or_default();
        items.retain(|i| i["key"] != key);
        items.push(json!({"key": key, "value": value}));
        let body = json!({"fingerprint": now["metadata"]["fingerprint"], "items": items});
        compute(ep, "POST", &format!("zones/{ZONE}/instances/{name}/setMetadata"), Some(body)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn gce_wait_for_change_returns_when_set_metadata_changes_an_attribute() {
        let emu = setup().await;
        let path = instance(&emu.endpoint, "waiter", true).await;
        let (base, _) = listen(&emu, &path).await;
        let url = format!("{base}/instance/attributes/hpc-slurm-config");
        let (_, head, first) = ask("GET", &url, &[FLAVOR]).await.unwrap();
        assert_eq!(first, "rev-1 payload");
        let etag = head["etag"].to_str().unwrap().to_owned();
        // Unchanged: the long poll runs its timeout out and answers the same value and ETag.
        let started = Instant::now();
        let (_, head, same) = ask("GET", &format!("{url}?wait_for_change=true&last_etag={etag}&timeout_sec=1"), &[FLAVOR]).await.unwrap();
        assert!(started.elapsed() >= Duration::from_millis(900), "{:?}", started.elapsed());
        assert_eq!((same.as_str(), head["etag"].to_str().unwrap()), ("rev-1 payload", etag.as_str()));
        // A stale last_etag answers at once.
        let started = Instant::now();
        assert_eq!(get(&format!("{url}?wait_for_change=true&last_etag=0000&timeout_sec=30"), &[FLAVOR]).await.1, "rev-1 payload");
        assert!(started.elapsed() < Duration::from_secs(5));
        // A setMetadata through the Compute API wakes the waiting request.
        let waiting = {
            let url = format!("{url}?wait_for_change=true&last_etag={etag}&timeout_sec=60");
            tokio::spawn(async move {
                let started = Instant::now();
                let answer = ask("GET", &url, &[FLAVOR]).await.unwrap();
                (answer, started.elapsed())
            })
        };
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!waiting.is_finished(), "it waits for a change");
        set_attribute(&emu.endpoint, "waiter", "hpc-slurm-config", "rev-2 payload").await;
        let ((status, head, value), waited) = tokio::time::timeout(Duration::from_secs(10), waiting).await.unwrap().unwrap();
        assert_eq!((status, value.as_str()), (200, "rev-2 payload"));
        assert_ne!(head["etag"].to_str().unwrap(), etag);
        assert!(waited < Duration::from_secs(5), "woken by the change, not the timeout: {waited:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deleted_gce_instance_is_unreachable_and_reset_closes_the_listeners() {
        let emu = setup().await;
        let gone = instance(&emu.endpoint, "gone", true).await;
        let kept = instance(&emu.endpoint, "kept", true).await;
        let (gone_base, _) = listen(&emu, &gone).await;
        let (kept_base, _) = listen(&emu, &kept).await;
        assert_eq!(get(&format!("{gone_base}/instance/name"), &[FLAVOR]).await.1, "gone");
        compute(&emu.endpoint, "DELETE", &format!("zones/{ZONE}/instances/gone"), None).await;
        for _ in 0..2 {
            assert!(ask("GET", &format!("{gone_base}/instance/name"), &[FLAVOR]).await.is_err());
        }
        assert_eq!(admin_post(&emu.endpoint, "metadata", json!({"instance": gone})).await.0, 404);
        assert_eq!(get(&format!("{kept_base}/instance/name"), &[FLAVOR]).await.1, "kept");
        assert_eq!(admin_post(&emu.endpoint, "reset", json!({})).await.0, 200);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(ask("GET", &format!("{kept_base}/instance/name"), &[FLAVOR]).await.is_err(), "reset closes the listener");
    }
}

mod azure {
    use super::*;
    use hpc_emulators::harness::{azure_admin, azure_call, start_azure};
    use std::path::PathBuf;

    const SUB: &str = "/subscriptions/00000000-0000-0000-0000-0000000000aa";
    const V: &str = "api-version=2026-04-01";
    const V_NET: &str = "api-version=2026-03-01";
    const IMDS: &str = "api-version=2021-02-01";

    struct Arm {
        ep: String,
        pem: PathBuf,
    }

    impl Arm {
        fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
            let out = azure_call(&self.ep, &self.pem, method, path, body, &[]);
            let status = out["status"].as_u64().unwrap_or_default();
            assert!((200..300).contains(&status), "{method} {path}: {out}");
            out["body"].clone()
        }

        fn listen(&self, id: &str) -> (String, Value) {
            let out = azure_admin(&self.ep, &self.pem, "POST", "metadata", Some(json!({"instance": id})));
            (format!("http://127.0.0.1:{}", out["port"]), out)
        }

        /// A resource group, a network 10.30.0.0/16 with one subnet 10.30.1.0/24: the subnet's id.
        fn network(&self, rg: &str) -> String {
            let group = format!("{SUB}/resourceGroups/{rg}");
            self.call("PUT", &format!("{group}?api-version=2025-04-01"), Some(json!({"location": "eastus"})));
            let vnet = format!("{group}/providers/Microsoft.Network/virtualNetworks/net");
            self.call(
                "PUT",
                &format!("{vnet}?{V_NET}"),
                Some(json!({"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.30.0.0/16"]},
                            "subnets": [{"name": "hosts", "properties": {"addressPrefix": "10.30.1.0/24"}}]}})),
            );
            format!("{vnet}/subnets/hosts")
        }
    }

    fn arm() -> Arm {
        let (ep, pem) = start_azure();
        Arm { ep, pem }
    }

    const META: (&str, &str) = ("Metadata", "true");

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn azure_imds_needs_the_metadata_header_and_a_known_api_version() {
        let arm = arm();
        let subnet = arm.network("hdr-rg");
        let vm = standalone(&arm, "hdr-rg", "hdr-vm", &subnet, Some("dXNlcg=="));
        let (base, _) = arm.listen(&vm);
        let (status, body) = get(&format!("{base}/metadata/instance?{IMDS}"), &[]).await;
        assert_eq!(status, 400);
        assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["error"], "Bad request. Required metadata header not specified");
        assert_eq!(get(&format!("{base}/metadata/instance?{IMDS}"), &[META, ("X-Forwarded-For", "10.0.0.1")]).await.0, 400);
        for query in ["", "?api-version=2016-01-01"] {
            let (status, body) = get(&format!("{base}/metadata/instance{query}"), &[META]).await;
            assert_eq!(status, 400, "{query}");
            let body: Value = serde_json::from_str(&body).unwrap();
            assert!(body["error"].as_str().unwrap().contains("api-version is invalid or was not specified"), "{body}");
            assert_eq!(body["newest-versions"][0], "2025-04-07");
        }
        assert_eq!(get(&format!("{base}/metadata/instance?{IMDS}&{IMDS}"), &[META]).await.0, 400, "a repeated parameter");
        let (status, versions) = get(&format!("{base}/metadata/versions"), &[META]).await;
        assert_eq!(status, 200);
        assert!(serde_json::from_str::<Value>(&versions).unwrap()["apiVersions"].as_array().unwrap().contains(&json!("2021-01-01")));
    }

    /// A NIC in `subnet` (dynamic address) and a VM on it with custom data and, when given, user data: its id.
    fn standalone(arm: &Arm, rg: &str, name: &str, subnet: &str, user_data: Option<&str>) -> String {
        let group = format!("{SUB}/resourceGroups/{rg}");
        let nic = format!("{group}/providers/Microsoft.Network/networkInterfaces/{name}-nic");
        arm.call(
            "PUT",
            &format!("{nic}?{V_NET}"),
            Some(json!({"location": "eastus", "properties": {"ipConfigurations": [{"name": "ipconfig",
                        "properties": {"subnet": {"id": subnet}, "privateIPAllocationMethod": "Dynamic", "primary": true}}]}})),
        );
        let vm = format!("{group}/providers/Microsoft.Compute/virtualMachines/{name}");
        let mut props = json!({
            "hardwareProfile": {"vmSize": "Standard_D8s_v5"},
            "osProfile": {"computerName": name, "adminUsername": "azureuser", "customData": "I2Nsb3VkLWNvbmZpZwo=",
                          "linuxConfiguration": {"disablePasswordAuthentication": true,
                              "ssh": {"publicKeys": [{"path": "/home/azureuser/.ssh/authorized_keys", "keyData": "ssh-ed25519 AAAA test"}]}}},
            "networkProfile": {"networkInterfaces": [{"id": nic, "properties": {"primary": true}}]},
        });
        if let Some(ud) = user_data {
            props["userData"] = json!(ud);
        }
        arm.call(
            "PUT",
            &format!("{vm}?{V}"),
            Some(json!({"location": "eastus", "tags": {"hpc:slurm-config": "r1", "team": "ml"}, "properties": props})),
        );
        vm
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_vms_user_data_is_served_a_patch_shows_at_once_and_custom_data_never() {
        let arm = arm();
        let subnet = arm.network("ud-rg");
        let vm = standalone(&arm, "ud-rg", "slurm-ctl", &subnet, Some("Zmlyc3Q="));
        let (base, facts) = arm.listen(&vm);
        assert_eq!(facts["custom_data"], "I2Nsb3VkLWNvbmZpZwo=", "the provisioning media's custom data, for the boot harness");
        assert_eq!(facts["hostname"], "slurm-ctl");
        let nic = arm.call(
            "GET",
            &format!("{SUB}/resourceGroups/ud-rg/providers/Microsoft.Network/networkInterfaces/slurm-ctl-nic?{V_NET}"),
            None,
        );
        let ip = nic["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"].as_str().unwrap().to_owned();
        assert!(ip.starts_with("10.30.1."), "a dynamic address of the subnet: {nic}");
        assert_eq!(facts["private_ip"], ip);

        let g = |path: String| {
            let url = format!("{base}{path}");
            async move { get(&url, &[META]).await }
        };
        assert_eq!(g(format!("/metadata/instance/compute/userData?{IMDS}&format=text")).await, (200, "Zmlyc3Q=".into()));
        assert_eq!(g(format!("/metadata/instance/compute/name?{IMDS}&format=text")).await, (200, "slurm-ctl".into()));
        assert_eq!(g(format!("/metadata/instance/compute/name?{IMDS}")).await.0, 400, "a leaf needs format=text");
        let doc: Value = serde_json::from_str(&g(format!("/metadata/instance?{IMDS}")).await.1).unwrap();
        let compute = &doc["compute"];
        assert_eq!(compute["customData"], "", "IMDS never serves custom data");
        assert_eq!(compute["resourceId"].as_str().unwrap().to_lowercase(), vm.to_lowercase());
        assert_eq!(compute["resourceGroupName"], "ud-rg");
        assert_eq!(compute["vmSize"], "Standard_D8s_v5");
        assert_eq!(compute["osProfile"]["computerName"], "slurm-ctl");
        assert_eq!(compute["tagsList"], json!([{"name": "hpc:slurm-config", "value": "r1"}, {"name": "team", "value": "ml"}]));
        assert_eq!(compute["tags"], "hpc:slurm-config:r1;team:ml");
        assert_eq!(compute["vmId"], arm.call("GET", &format!("{vm}?{V}"), None)["properties"]["vmId"]);
        assert_eq!(doc["network"]["interface"][0]["ipv4"]["ipAddress"][0]["privateIpAddress"], ip);
        assert_eq!(doc["network"]["interface"][0]["ipv4"]["subnet"][0], json!({"address": "10.30.1.0", "prefix": "24"}));
        // userData came with api-version 2021-01-01: an older version's document has none.
        let old: Value = serde_json::from_str(&g("/metadata/instance/compute?api-version=2020-12-01".into()).await.1).unwrap();
        assert!(old.get("userData").is_none() && old.get("name").is_some(), "{old}");
        // VirtualMachines_Update (PATCH) of userData shows at once.
        arm.call("PATCH", &format!("{vm}?{V}"), Some(json!({"properties": {"userData": "c2Vjb25k"}})));
        assert_eq!(g(format!("/metadata/instance/compute/userData?{IMDS}&format=text")).await.1, "c2Vjb25k");
        // A VM given no userData has none to serve.
        let bare = standalone(&arm, "ud-rg", "bare", &subnet, None);
        let (bare, _) = arm.listen(&bare);
        assert_eq!(get(&format!("{bare}/metadata/instance/compute/userData?{IMDS}&format=text"), &[META]).await, (200, String::new()));
        // No identity, no token.
        let (status, body) =
            g("/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https://management.azure.com/".to_owned()).await;
        assert_eq!(status, 400, "{body}");
        // Deleted: unreachable.
        arm.call("DELETE", &format!("{vm}?{V}"), None);
        assert!(ask("GET", &format!("{base}/metadata/instance?{IMDS}"), &[META]).await.is_err());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn scale_set_vms_are_served_with_their_models_user_data_name_and_address() {
        let arm = arm();
        let subnet = arm.network("ss-rg");
        let set = format!("{SUB}/resourceGroups/ss-rg/providers/Microsoft.Compute/virtualMachineScaleSets/gpu");
        let body = json!({
            "location": "eastus", "sku": {"name": "Standard_ND96isr_H100_v5", "tier": "Standard", "capacity": 2},
            "tags": {"hpc:cluster": "train"}, "identity": {"type": "SystemAssigned"},
            "properties": {"orchestrationMode": "Uniform", "overprovision": false, "upgradePolicy": {"mode": "Manual"},
                "virtualMachineProfile": {
                    "userData": "bm9kZQ==",
                    "osProfile": {"computerNamePrefix": "gpu", "adminUsername": "azureuser", "customData": "Y3VzdG9t",
                        "linuxConfiguration": {"disablePasswordAuthentication": true,
                            "ssh": {"publicKeys": [{"path": "/home/azureuser/.ssh/authorized_keys", "keyData": "ssh-ed25519 AAAA test"}]}}},
                    "networkProfile": {"networkInterfaceConfigurations": [{"name": "nic", "properties": {"primary": true,
                        "ipConfigurations": [{"name": "ip", "properties": {"subnet": {"id": subnet}}}]}}]}}},
        });
        arm.call("PUT", &format!("{set}?{V}"), Some(body));
        let vms = arm.call("GET", &format!("{set}/virtualMachines?{V}"), None);
        let vm = vms["value"][1]["id"].as_str().unwrap().to_owned();
        let nics = arm.call("GET", &format!("{set}/networkInterfaces?api-version=2018-10-01"), None);
        let ip = nics["value"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["properties"]["virtualMachine"]["id"].as_str() == Some(vm.as_str()))
            .map(|n| n["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"].clone())
            .unwrap();
        let (base, facts) = arm.listen(&vm);
        assert_eq!(facts["private_ip"], ip);
        assert_eq!(facts["custom_data"], "Y3VzdG9t");
        let doc: Value = serde_json::from_str(&get(&format!("{base}/metadata/instance?{IMDS}"), &[META]).await.1).unwrap();
        let compute = &doc["compute"];
        assert_eq!(compute["name"], "gpu_1");
        assert_eq!(compute["vmScaleSetName"], "gpu");
        assert_eq!(compute["osProfile"]["computerName"], "gpu000001");
        assert_eq!(compute["userData"], "bm9kZQ==");
        assert_eq!(compute["tagsList"], json!([{"name": "hpc:cluster", "value": "train"}]));
        assert!(compute["placementGroupId"].as_str().is_some_and(|p| p.len() == 36), "{compute}");
        assert_eq!(doc["network"]["interface"][0]["ipv4"]["ipAddress"][0]["privateIpAddress"], ip);
        // With an identity, a token for the resource asked for.
        let (status, token) =
            get(&format!("{base}/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https://management.azure.com/"), &[META])
                .await;
        assert_eq!(status, 200, "{token}");
        let token: Value = serde_json::from_str(&token).unwrap();
        assert_eq!((token["resource"].as_str(), token["token_type"].as_str()), (Some("https://management.azure.com/"), Some("Bearer")));
        assert!(token["access_token"].as_str().is_some_and(|t| !t.is_empty()));
        assert_eq!(get(&format!("{base}/metadata/identity/oauth2/token?api-version=2018-02-01"), &[META]).await.0, 400, "no resource");
    }

    /// A scale set of two VMs whose model gives them `bm9kZQ==` as userData, in a network of its own: its id.
    fn model_set(arm: &Arm, rg: &str) -> String {
        let subnet = arm.network(rg);
        let set = format!("{SUB}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachineScaleSets/gpu");
        let body = json!({
            "location": "eastus", "sku": {"name": "Standard_ND96isr_H100_v5", "tier": "Standard", "capacity": 2},
            "properties": {"orchestrationMode": "Uniform", "overprovision": false, "upgradePolicy": {"mode": "Manual"},
                "virtualMachineProfile": {
                    "userData": "bm9kZQ==",
                    "osProfile": {"computerNamePrefix": "gpu", "adminUsername": "azureuser",
                        "linuxConfiguration": {"disablePasswordAuthentication": true,
                            "ssh": {"publicKeys": [{"path": "/home/azureuser/.ssh/authorized_keys", "keyData": "ssh-ed25519 AAAA test"}]}}},
                    "networkProfile": {"networkInterfaceConfigurations": [{"name": "nic", "properties": {"primary": true,
                        "ipConfigurations": [{"name": "ip", "properties": {"subnet": {"id": subnet}}}]}}]}}},
        });
        arm.call("PUT", &format!("{set}?{V}"), Some(body));
        set
    }

    /// VirtualMachineScaleSetVMs_Update writes one VM's userData: its metadata service serves it at once
    /// (the VM keeps running; nothing reboots it), while the set's other VM still gets the model's.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_scale_set_vm_is_served_its_own_user_data_once_it_is_written() {
        use base64::Engine;
        let arm = arm();
        let set = model_set(&arm, "own-rg");
        let (first, _) = arm.listen(&format!("{set}/virtualMachines/0"));
        let (second, _) = arm.listen(&format!("{set}/virtualMachines/1"));
        let user_data = |base: &str| {
            let url = format!("{base}/metadata/instance/compute/userData?api-version=2021-01-01&format=text");
            async move { get(&url, &[META]).await }
        };
        assert_eq!(user_data(&second).await, (200, "bm9kZQ==".into()), "the model's, before");
        let named = base64::engine::general_purpose::STANDARD.encode("hpc-node-name=train-7\n");
        arm.call("PUT", &format!("{set}/virtualMachines/1?{V}"), Some(json!({"location": "eastus", "properties": {"userData": named}})));
        assert_eq!(user_data(&second).await, (200, named.clone()), "its own, at once");
        assert_eq!(user_data(&first).await, (200, "bm9kZQ==".into()), "the other VM's is the model's still");
    }

    /// The join's `azure)` branch (node/slurm-join.sh, `node_name`) asks this metadata service for the
    /// VM's userData: nothing while the provider has not named the VM (the join waits), the name once it has.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_joins_azure_branch_reads_the_nodes_name_from_its_user_data() {
        use base64::Engine;
        let arm = arm();
        let set = model_set(&arm, "join-rg");
        let vm = format!("{set}/virtualMachines/1");
        let (base, _) = arm.listen(&vm);
        // The script's own node_name function, asking this listener instead of 169.254.169.254.
        let script = include_str!("../../node/slurm-join.sh");
        let start = script.find("node_name() {").expect("node_name in node/slurm-join.sh");
        let end = start + script[start..].find("\n}\n").expect("the end of node_name") + 3;
        let run = |function: String, md: String| async move {
            let out = tokio::process::Command::new("bash")
                .arg("-c")
                .arg(format!("set -euo pipefail\nmd={md}\n{function}\nnode_name"))
                .env("HPC_SLURM_CLOUD", "azure")
                .env("HPC_SLURM_CLUSTER", "train")
                .output()
                .await
                .unwrap();
            (out.status.success(), String::from_utf8_lossy(&out.stdout).trim().to_owned())
        };
        let function = script[start..end].to_owned();
        // The model's userData names nothing: no name yet, so the join's loop goes on waiting.
        let (_, said) = run(function.clone(), base.clone()).await;
        assert_eq!(said, "", "no name before the provider writes it");
        let named = base64::engine::general_purpose::STANDARD.encode("#cloud-config\nhpc-node-name=train-7\n");
        arm.call("PUT", &format!("{vm}?{V}"), Some(json!({"location": "eastus", "properties": {"userData": named}})));
        assert_eq!(run(function, base).await, (true, "train-7".to_owned()));
    }
}

mod oci {
    use super::*;
    use hpc_emulators::harness;
    use hpc_provider::clouds::oci::signing::{Request, Signer};

    const COMPARTMENT: &str = "ocid1.compartment.oc1..imds";
    const AD: &str = "Uocm:US-ASHBURN-AD-2";
    const BEARER: (&str, &str) = ("Authorization", "Bearer Oracle");

    struct Core {
        endpoint: String,
        signer: Signer,
    }

    impl Core {
        fn start() -> Core {
            let (endpoint, key) = harness::start_oci();
            let signer = Signer::from_pem(&key.private_key_pem, &key.tenancy, &key.user, &key.fingerprint).unwrap();
            Core { endpoint, signer }
        }

        /// A signed call: (status, etag, JSON body).
        async fn call(&self, method: &str, path: &str, body: Option<Value>, extra: &[(&str, &str)]) -> (u16, String, Value) {
            let host = self.endpoint.trim_start_matches("http://").to_owned();
            let bytes = body.map(|b| b.to_string().into_bytes());
            let headers = self
                .signer
                .sign(&Request {
                    method,
                    host: &host,
                    path_and_query: path,
                    date: "Sun, 29 Nov 2026 20:00:00 GMT",
                    body: bytes.as_deref(),
                    content_type: "application/json",
                })
                .unwrap();
            let mut req = http().request(reqwest::Method::from_bytes(method.as_bytes()).unwrap(), format!("{}{path}", self.endpoint));
            for (k, v) in headers.iter().filter(|(k, _)| k != "host" && k != "content-length") {
                req = req.header(k.as_str(), v.as_str());
            }
            for (k, v) in extra {
                req = req.header(*k, *v);
            }
            if let Some(b) = bytes {
                req = req.body(b);
            }
            let resp = req.send().await.unwrap();
            let status = resp.status().as_u16();
            let etag = resp.headers().get("etag").and_then(|e| e.to_str().ok()).unwrap_or_default().to_owned();
            (status, etag, resp.json().await.unwrap_or(Value::Null))
        }

        async fn created(&self, path: &str, body: Value) -> Value {
            let (status, _, out) = self.call("POST", path, Some(body), &[]).await;
            assert!(status == 200 || status == 202, "POST {path}: {status} {out}");
            out
        }

        /// A VCN and a subnet 10.40.1.0/24: the subnet's OCID.
        async fn subnet(&self) -> String {
            let vcn = self
                .created("/20160918/vcns", json!({"compartmentId": COMPARTMENT, "cidrBlocks": ["10.40.0.0/16"], "displayName": "vcn"}))
                .await;
            let subnet = self
                .created(
                    "/20160918/subnets",
                    json!({"compartmentId": COMPARTMENT, "vcnId": vcn["id"], "cidrBlock": "10.40.1.0/24", "displayName": "sub"}),
                )
                .await;
            subnet["id"].as_str().unwrap().to_owned()
        }

        async fn launch(&self, subnet: &str, name: &str, legacy_disabled: bool) -> Value {
            let mut body = json!({
                "compartmentId": COMPARTMENT, "availabilityDomain": AD, "shape": "BM.GPU.H100.8", "displayName": name,
                "sourceDetails": {"sourceType": "image", "imageId": "ocid1.image.oc1..gpu"},
                "createVnicDetails": {"subnetId": subnet, "hostnameLabel": name},
                "metadata": {"user_data": "I2Nsb3VkLWNvbmZpZwo=", "ssh_authorized_keys": "ssh-ed25519 AAAA test", "hpc_slurm_config": "rev-1"},
                "freeformTags": {"hpc:cluster": "train"},
            });
            if legacy_disabled {
                body["instanceOptions"] = json!({"areLegacyImdsEndpointsDisabled": true});
            }
            self.created("/20160918/instances", body).await
        }

        async fn listen(&self, id: &str) -> (String, Value) {
            let (status, out) = admin_post(&self.endpoint, "metadata", json!({"instance": id})).await;
            assert_eq!(status, 200, "{out}");
            (format!("http://127.0.0.1:{}", out["port"]), out)
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn oci_imds_v2_needs_the_bearer_header_and_serves_the_instance_and_its_vnics() {
        let core = Core::start();
        let subnet = core.subnet().await;
        let launched = core.launch(&subnet, "slurm-ctl", false).await;
        let id = launched["id"].as_str().unwrap();
        let (base, facts) = core.listen(id).await;
        assert_eq!(get(&format!("{base}/opc/v2/instance/"), &[]).await.0, 401, "no Authorization: Bearer Oracle");
        let (status, doc) = get(&format!("{base}/opc/v2/instance/"), &[BEARER]).await;
        assert_eq!(status, 200);
        let doc: Value = serde_json::from_str(&doc).unwrap();
        assert_eq!(doc["id"], id);
        assert_eq!(doc["displayName"], "slurm-ctl");
        assert_eq!(doc["hostname"], "slurm-ctl");
        assert_eq!(doc["availabilityDomain"], AD);
        assert_eq!(doc["ociAdName"], "iad-ad-2");
        assert_eq!(doc["canonicalRegionName"], "us-ashburn-1");
        assert_eq!(doc["regionInfo"]["regionIdentifier"], "us-ashburn-1");
        assert_eq!(doc["compartmentId"], COMPARTMENT);
        assert_eq!(doc["shape"], "BM.GPU.H100.8");
        assert_eq!(doc["freeformTags"], json!({"hpc:cluster": "train"}));
        assert_eq!(doc["metadata"]["user_data"], "I2Nsb3VkLWNvbmZpZwo=");
        assert_eq!(doc["metadata"]["ssh_authorized_keys"], "ssh-ed25519 AAAA test");
        assert!(doc["timeCreated"].as_i64().is_some_and(|t| t > 1_600_000_000_000), "{doc}");
        assert_eq!(get(&format!("{base}/opc/v2/instance/displayName"), &[BEARER]).await, (200, "slurm-ctl".into()));
        assert_eq!(get(&format!("{base}/opc/v2/instance/metadata/hpc_slurm_config"), &[BEARER]).await, (200, "rev-1".into()));
        assert_eq!(get(&format!("{base}/opc/v2/instance/metadata/nope"), &[BEARER]).await.0, 404);
        // The VNICs: the primary one as Core reports it.
        let (_, vnics) = get(&format!("{base}/opc/v2/vnics/"), &[BEARER]).await;
        let vnics: Value = serde_json::from_str(&vnics).unwrap();
        let (_, _, attachments) =
            core.call("GET", &format!("/20160918/vnicAttachments?compartmentId={COMPARTMENT}&instanceId={id}"), None, &[]).await;
        let vnic_id = attachments[0]["vnicId"].as_str().unwrap();
        let (_, _, vnic) = core.call("GET", &format!("/20160918/vnics/{vnic_id}"), None, &[]).await;
        assert_eq!(vnics[0]["vnicId"], vnic_id);
        assert_eq!(vnics[0]["privateIp"], vnic["privateIp"]);
        assert_eq!(vnics[0]["subnetCidrBlock"], "10.40.1.0/24");
        assert_eq!(vnics[0]["virtualRouterIp"], "10.40.1.1");
        assert!(vnics[0]["macAddr"].is_string() && vnics[0]["vlanTag"].is_u64(), "{vnics}");
        assert_eq!(facts["private_ip"], vnic["privateIp"]);
        // Legacy v1 answers without the header while the instance allows it.
        assert_eq!(get(&format!("{base}/opc/v1/instance/displayName"), &[]).await, (200, "slurm-ctl".into()));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn oci_legacy_v1_endpoints_are_404_when_the_instance_disables_them() {
        let core = Core::start();
        let subnet = core.subnet().await;
        let launched = core.launch(&subnet, "v2-only", true).await;
        let (base, _) = core.listen(launched["id"].as_str().unwrap()).await;
        assert_eq!(get(&format!("{base}/opc/v1/instance/"), &[]).await.0, 404);
        assert_eq!(get(&format!("{base}/opc/v1/vnics/"), &[]).await.0, 404);
        assert_eq!(get(&format!("{base}/opc/v2/instance/displayName"), &[BEARER]).await, (200, "v2-only".into()));
        assert_eq!(get(&format!("{base}/opc/v2/instance/displayName"), &[BEARER, ("X-Forwarded-For", "10.0.0.1")]).await.0, 403);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn oci_metadata_updated_later_shows_at_once_and_a_terminated_instance_is_unreachable() {
        let core = Core::start();
        let subnet = core.subnet().await;
        let launched = core.launch(&subnet, "changing", false).await;
        let id = launched["id"].as_str().unwrap().to_owned();
        let (base, _) = core.listen(&id).await;
        let url = format!("{base}/opc/v2/instance/metadata/hpc_slurm_config");
        assert_eq!(get(&url, &[BEARER]).await.1, "rev-1");
        // UpdateInstance replaces the metadata (user_data and ssh_authorized_keys as launched).
        let (_, etag, now) = core.call("GET", &format!("/20160918/instances/{id}"), None, &[]).await;
        let mut metadata = now["metadata"].clone();
        metadata["hpc_slurm_config"] = json!("rev-2");
        let (status, _, out) =
            core.call("PUT", &format!("/20160918/instances/{id}"), Some(json!({"metadata": metadata})), &[("if-match", &etag)]).await;
        assert_eq!(status, 200, "{out}");
        assert_eq!(get(&url, &[BEARER]).await.1, "rev-2");
        let (status, _, _) = core.call("DELETE", &format!("/20160918/instances/{id}"), None, &[]).await;
        assert!(status == 204 || status == 200, "{status}");
        for _ in 0..2 {
            assert!(ask("GET", &url, &[BEARER]).await.is_err(), "unreachable once terminating");
        }
        assert_eq!(admin_post(&core.endpoint, "metadata", json!({"instance": id})).await.0, 404);
    }
}
