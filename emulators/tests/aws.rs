//! The AWS emulator (moto + hpc_moto.py) through the real aws-sdk-ec2 and aws-sdk-fsx clients: the gaps
//! our extension closes, each with its success path, not-found path and real error codes. Each test works
//! in its own region so they can share one emulator.

mod common;

use std::time::{Duration, Instant};

use aws_sdk_ec2::types::{
    Filter, InstanceType, LaunchTemplateInstanceNetworkInterfaceSpecificationRequest, LaunchTemplatePlacementRequest,
    LaunchTemplateSpecification, PlacementStrategy, RequestLaunchTemplateData, ResourceType, Tag, TagSpecification,
};
use common::{admin, aws, code, ec2, fsx, message};

const AMI: &str = "ami-12c6146b"; // one of moto's stock images

async fn network(client: &aws_sdk_ec2::Client, zone: &str) -> (String, String, String) {
    let vpc = client.create_vpc().cidr_block("10.0.0.0/16").send().await.unwrap().vpc.unwrap().vpc_id.unwrap();
    let subnet = client
        .create_subnet()
        .vpc_id(&vpc)
        .cidr_block("10.0.0.0/20")
        .availability_zone(zone)
        .send()
        .await
        .unwrap()
        .subnet
        .unwrap()
        .subnet_id
        .unwrap();
    let sg = client.create_security_group().group_name("efa").description("efa").vpc_id(&vpc).send().await.unwrap().group_id.unwrap();
    (vpc, subnet, sg)
}

fn efa_layout(count: i32, subnet: &str, sg: &str) -> Vec<LaunchTemplateInstanceNetworkInterfaceSpecificationRequest> {
    (0..count)
        .map(|card| {
            LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder()
                .network_card_index(card)
                .device_index(if card == 0 { 0 } else { 1 })
                .interface_type(if card == 0 { "efa" } else { "efa-only" })
                .subnet_id(subnet)
                .groups(sg)
                .build()
        })
        .collect()
}

#[tokio::test]
async fn placement_groups_have_the_real_lifecycle_and_error_codes() {
    let ep = aws();
    let client = ec2(ep, "us-west-2");
    let tags = TagSpecification::builder()
        .resource_type(ResourceType::PlacementGroup)
        .tags(Tag::builder().key("hpc:fabric").value("t").build())
        .build();
    let created = client
        .create_placement_group()
        .group_name("pg-a")
        .strategy(PlacementStrategy::Cluster)
        .tag_specifications(tags)
        .send()
        .await
        .unwrap();
    let group = created.placement_group.unwrap();
    let group_id = group.group_id.clone().unwrap();
    assert!(group_id.starts_with("pg-"));
    assert_eq!(group.strategy, Some(PlacementStrategy::Cluster));
    // moto alone refuses CreateTags on pg- ids (InvalidID); the provider tags placement groups after creation.
    client.create_tags().resources(&group_id).tags(Tag::builder().key("owner").value("ml").build()).send().await.unwrap();

    let dup = client.create_placement_group().group_name("pg-a").strategy(PlacementStrategy::Cluster).send().await.unwrap_err();
    assert_eq!(code(&dup), "InvalidPlacementGroup.Duplicate");

    let by_tag =
        client.describe_placement_groups().filters(Filter::builder().name("tag:hpc:fabric").values("t").build()).send().await.unwrap();
    assert_eq!(by_tag.placement_groups().len(), 1);
    let unknown = client.describe_placement_groups().group_names("nope").send().await.unwrap_err();
    assert_eq!(code(&unknown), "InvalidPlacementGroup.Unknown");

    // In use while an instance sits in it; deletable once it is terminated.
    let (_, subnet, _) = network(&client, "us-west-2a").await;
    let run = client
        .run_instances()
        .image_id(AMI)
        .instance_type(InstanceType::C5Large)
        .min_count(1)
        .max_count(1)
        .subnet_id(&subnet)
        .placement(aws_sdk_ec2::types::Placement::builder().group_name("pg-a").build())
        .send()
        .await
        .unwrap();
    let id = run.instances()[0].instance_id().unwrap().to_owned();
    let in_use = client.delete_placement_group().group_name("pg-a").send().await.unwrap_err();
    assert_eq!(code(&in_use), "InvalidPlacementGroup.InUse");
    client.terminate_instances().instance_ids(&id).send().await.unwrap();
    client.delete_placement_group().group_name("pg-a").send().await.unwrap();
    let gone = client.delete_placement_group().group_name("pg-a").send().await.unwrap_err();
    assert_eq!(code(&gone), "InvalidPlacementGroup.Unknown");

    let launch_into_unknown = client
        .run_instances()
        .image_id(AMI)
        .min_count(1)
        .max_count(1)
        .placement(aws_sdk_ec2::types::Placement::builder().group_name("pg-x").build())
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&launch_into_unknown), "InvalidPlacementGroup.Unknown");
}

#[tokio::test]
async fn p5_nodes_get_32_efa_interfaces_on_cards_0_to_31_from_the_launch_template() {
    let ep = aws();
    let client = ec2(ep, "eu-west-1");
    let (_, subnet, sg) = network(&client, "eu-west-1a").await;
    client.create_placement_group().group_name("train-pg").strategy(PlacementStrategy::Cluster).send().await.unwrap();
    let data = RequestLaunchTemplateData::builder()
        .instance_type(InstanceType::P548xlarge)
        .image_id(AMI)
        .set_network_interfaces(Some(efa_layout(32, &subnet, &sg)))
        .placement(LaunchTemplatePlacementRequest::builder().group_name("train-pg").build())
        .build();
    let lt = client.create_launch_template().launch_template_name("train-lt").launch_template_data(data).send().await.unwrap();
    let lt_id = lt.launch_template.unwrap().launch_template_id.unwrap();
    let tags = TagSpecification::builder()
        .resource_type(ResourceType::Instance)
        .tags(Tag::builder().key("hpc:cluster").value("train").build())
        .build();
    client
        .run_instances()
        .launch_template(LaunchTemplateSpecification::builder().launch_template_id(&lt_id).build())
        .min_count(4)
        .max_count(4)
        .tag_specifications(tags)
        .send()
        .await
        .unwrap();

    // One filtered call finds every node of the cluster in its placement group.
    let found = client
        .describe_instances()
        .filters(Filter::builder().name("placement-group-name").values("train-pg").build())
        .filters(Filter::builder().name("tag:hpc:cluster").values("train").build())
        .send()
        .await
        .unwrap();
    let instances: Vec<_> = found.reservations().iter().flat_map(|r| r.instances()).collect();
    assert_eq!(instances.len(), 4);
    for instance in instances {
        assert_eq!(instance.placement().and_then(|p| p.group_name()), Some("train-pg"));
        let mut nics: Vec<(i32, i32, String)> = instance
            .network_interfaces()
            .iter()
            .map(|n| {
                let a = n.attachment().unwrap();
                (a.network_card_index().unwrap_or(-1), a.device_index().unwrap(), n.interface_type().unwrap().to_owned())
            })
            .collect();
        nics.sort();
        assert_eq!(nics.len(), 32, "{nics:?}");
        assert_eq!(nics[0], (0, 0, "efa".to_owned()));
        for (card, nic) in nics.iter().enumerate().skip(1) {
            assert_eq!(nic, &(card as i32, 1, "efa-only".to_owned()));
        }
    }
}

#[tokio::test]
async fn efa_layouts_the_instance_type_cannot_take_are_rejected() {
    let ep = aws();
    let client = ec2(ep, "eu-central-1");
    let (_, subnet, sg) = network(&client, "eu-central-1a").await;
    let run = |itype: InstanceType, layout: Vec<LaunchTemplateInstanceNetworkInterfaceSpecificationRequest>| {
        let client = client.clone();
        async move {
            let nics = layout
                .into_iter()
                .map(|n| {
                    aws_sdk_ec2::types::InstanceNetworkInterfaceSpecification::builder()
                        .set_network_card_index(n.network_card_index)
                        .set_device_index(n.device_index)
                        .set_interface_type(n.interface_type)
                        .set_subnet_id(n.subnet_id)
                        .set_groups(n.groups)
                        .build()
                })
                .collect();
            client
                .run_instances()
                .image_id(AMI)
                .instance_type(itype)
                .min_count(1)
                .max_count(1)
                .set_network_interfaces(Some(nics))
                .send()
                .await
        }
    };
    let too_many = run(InstanceType::P5en48xlarge, efa_layout(17, &subnet, &sg)).await.unwrap_err();
    assert_eq!(code(&too_many), "InvalidParameterValue");
    assert!(message(&too_many).contains("p5en.48xlarge"), "{}", message(&too_many));

    let no_efa = run(InstanceType::C5Large, efa_layout(1, &subnet, &sg)).await.unwrap_err();
    assert_eq!(code(&no_efa), "InvalidParameterCombination");

    let card0 = run(InstanceType::P6B30048xlarge, efa_layout(2, &subnet, &sg)).await.unwrap_err();
    assert!(message(&card0).contains("ENA only"), "{}", message(&card0));

    let mut efa_only_primary = efa_layout(2, &subnet, &sg);
    efa_only_primary[0].interface_type = Some("efa-only".into());
    let primary = run(InstanceType::P548xlarge, efa_only_primary).await.unwrap_err();
    assert!(message(&primary).contains("primary"), "{}", message(&primary));

    // p6-b300 the right way: ENA on card 0, EFA on cards 1-16.
    let mut b300 = efa_layout(17, &subnet, &sg);
    b300[0].interface_type = Some("interface".into());
    let ok = run(InstanceType::P6B30048xlarge, b300).await.unwrap();
    let nics = ok.instances()[0].network_interfaces();
    assert_eq!(nics.iter().filter(|n| n.interface_type() == Some("efa-only")).count(), 16);
}

#[tokio::test]
async fn capacity_reservations_and_capacity_block_offerings() {
    let ep = aws();
    let client = ec2(ep, "ap-northeast-1");
    let created = client
        .create_capacity_reservation()
        .instance_type("p5.48xlarge")
        .instance_platform(aws_sdk_ec2::types::CapacityReservationInstancePlatform::LinuxUnix)
        .availability_zone("ap-northeast-1a")
        .instance_count(4)
        .send()
        .await
        .unwrap();
    let id = created.capacity_reservation.unwrap().capacity_reservation_id.unwrap();
    let described = client.describe_capacity_reservations().capacity_reservation_ids(&id).send().await.unwrap();
    assert_eq!(described.capacity_reservations()[0].available_instance_count(), Some(4));
    client.cancel_capacity_reservation().capacity_reservation_id(&id).send().await.unwrap();
    let missing = client.describe_capacity_reservations().capacity_reservation_ids("cr-00000000000000000").send().await.unwrap_err();
    assert_eq!(code(&missing), "InvalidCapacityReservationId.NotFound");

    let offerings = client
        .describe_capacity_block_offerings()
        .instance_type("p5.48xlarge")
        .instance_count(16)
        .capacity_duration_hours(24)
        .send()
        .await
        .unwrap();
    let offer = &offerings.capacity_block_offerings()[0];
    assert_eq!(offer.instance_count(), Some(16));
    assert_eq!(offer.capacity_block_duration_hours(), Some(24));
    let too_big = client
        .describe_capacity_block_offerings()
        .instance_type("p5.48xlarge")
        .instance_count(65)
        .capacity_duration_hours(24)
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&too_big), "InvalidParameterValue");
}

#[tokio::test]
async fn fsx_lustre_lifecycle_update_associations_and_not_found() {
    use aws_sdk_fsx::error::ProvideErrorMetadata;
    use aws_sdk_fsx::types::{CreateFileSystemLustreConfiguration, FileSystemLifecycle, FileSystemType, LustreDeploymentType};
    let ep = aws();
    let client = ec2(ep, "ca-central-1");
    let (_, subnet, sg) = network(&client, "ca-central-1a").await;
    let fsx = fsx(ep, "ca-central-1");
    let created = fsx
        .create_file_system()
        .file_system_type(FileSystemType::Lustre)
        .storage_capacity(4800)
        .subnet_ids(&subnet)
        .security_group_ids(&sg)
        .lustre_configuration(
            CreateFileSystemLustreConfiguration::builder()
                .deployment_type(LustreDeploymentType::Persistent2)
                .per_unit_storage_throughput(250)
                .build(),
        )
        .send()
        .await
        .unwrap()
        .file_system
        .unwrap();
    let id = created.file_system_id().unwrap().to_owned();
    assert_eq!(created.lifecycle(), Some(&FileSystemLifecycle::Creating));
    let mount_name = created.lustre_configuration().and_then(|l| l.mount_name()).unwrap().to_owned();
    assert_eq!(mount_name.len(), 8);

    let wait_available = |fsx: aws_sdk_fsx::Client, id: String| async move {
        let started = Instant::now();
        loop {
            let fs = fsx.describe_file_systems().file_system_ids(&id).send().await.unwrap().file_systems()[0].clone();
            if fs.lifecycle() == Some(&FileSystemLifecycle::Available) {
                return fs;
            }
            assert!(started.elapsed() < Duration::from_secs(10), "still {:?}", fs.lifecycle());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    wait_available(fsx.clone(), id.clone()).await;

    let updated = fsx.update_file_system().file_system_id(&id).storage_capacity(9600).send().await.unwrap().file_system.unwrap();
    assert_eq!(updated.lifecycle(), Some(&FileSystemLifecycle::Updating));
    let fs = wait_available(fsx.clone(), id.clone()).await;
    assert_eq!(fs.storage_capacity(), Some(9600));
    assert_eq!(fs.lustre_configuration().and_then(|l| l.mount_name()), Some(mount_name.as_str()));
    let shrink = fsx.update_file_system().file_system_id(&id).storage_capacity(4800).send().await.unwrap_err();
    assert_eq!(shrink.code(), Some("BadRequest"));

    let dra = fsx
        .create_data_repository_association()
        .file_system_id(&id)
        .file_system_path("/data")
        .data_repository_path("s3://datasets/tokenized")
        .send()
        .await
        .unwrap()
        .association
        .unwrap();
    let dra_id = dra.association_id().unwrap().to_owned();
    let listed = fsx
        .describe_data_repository_associations()
        .filters(aws_sdk_fsx::types::Filter::builder().name(aws_sdk_fsx::types::FilterName::FileSystemId).values(&id).build())
        .send()
        .await
        .unwrap();
    assert_eq!(listed.associations().len(), 1);
    fsx.delete_data_repository_association().association_id(&dra_id).send().await.unwrap();
    let missing_dra = fsx.describe_data_repository_associations().association_ids(&dra_id).send().await.unwrap_err();
    assert_eq!(missing_dra.code(), Some("DataRepositoryAssociationNotFound"));

    fsx.delete_file_system().file_system_id(&id).send().await.unwrap();
    let missing = fsx.describe_file_systems().file_system_ids(&id).send().await.unwrap_err();
    assert_eq!(missing.code(), Some("FileSystemNotFound"));
}

#[tokio::test]
async fn out_of_band_changes_show_up_in_the_api() {
    let ep = aws();
    let client = ec2(ep, "sa-east-1");
    let (_, subnet, _) = network(&client, "sa-east-1a").await;
    client.create_placement_group().group_name("oob-pg").strategy(PlacementStrategy::Cluster).send().await.unwrap();
    let run = client
        .run_instances()
        .image_id(AMI)
        .instance_type(InstanceType::C5Large)
        .min_count(2)
        .max_count(2)
        .subnet_id(&subnet)
        .send()
        .await
        .unwrap();
    let victim = run.instances()[0].instance_id().unwrap().to_owned();

    admin(ep, "POST", "out-of-band", Some(serde_json::json!({"action": "terminate_instance", "id": victim})));
    let described = client.describe_instances().instance_ids(&victim).send().await.unwrap();
    let state = described.reservations()[0].instances()[0].state().unwrap().name().unwrap().as_str().to_owned();
    assert_eq!(state, "terminated");

    admin(ep, "POST", "out-of-band", Some(serde_json::json!({"action": "delete_placement_group", "id": "oob-pg"})));
    let gone = client.describe_placement_groups().group_names("oob-pg").send().await.unwrap_err();
    assert_eq!(code(&gone), "InvalidPlacementGroup.Unknown");

    // The inventory sees what is left: the other instance, the VPC pieces, no placement group.
    let inventory = admin(ep, "GET", "inventory", None);
    let instances = inventory["resources"]["ec2"]["instances"].as_array().unwrap();
    assert!(instances.iter().any(|i| i["id"] == run.instances()[1].instance_id().unwrap()));
    assert!(!instances.iter().any(|i| i["id"] == victim.as_str()));
}

#[tokio::test]
async fn the_deep_learning_base_gpu_ami_is_offered_for_clusters_without_an_image() {
    let client = ec2(aws(), "eu-west-1");
    let out = client
        .describe_images()
        .owners("amazon")
        .filters(Filter::builder().name("name").values("Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04)*").build())
        .send()
        .await
        .unwrap();
    let names: Vec<&str> = out.images().iter().filter_map(|i| i.name()).collect();
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(names[0].starts_with("Deep Learning Base OSS Nvidia Driver GPU AMI"));
}
