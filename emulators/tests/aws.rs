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
    network_of(client, zone, "10.0.0.0/20").await
}

/// A VPC of 10.x.0.0/16 holding one subnet `subnet_cidr` in `zone`, and a security group: (vpc, subnet, group).
async fn network_of(client: &aws_sdk_ec2::Client, zone: &str, subnet_cidr: &str) -> (String, String, String) {
    let vpc_cidr = format!("{}.0.0/16", subnet_cidr.splitn(3, '.').take(2).collect::<Vec<_>>().join("."));
    let vpc = client.create_vpc().cidr_block(vpc_cidr).send().await.unwrap().vpc.unwrap().vpc_id.unwrap();
    let subnet = client
        .create_subnet()
        .vpc_id(&vpc)
        .cidr_block(subnet_cidr)
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

/// p6e-gb200 launch template interfaces: ENA on card 0, EFA on the even cards 1-16, EFA-only on the odd ones.
fn gb200_layout(subnet: &str, sg: &str) -> Vec<LaunchTemplateInstanceNetworkInterfaceSpecificationRequest> {
    let mut nics = efa_layout(17, subnet, sg);
    nics[0].interface_type = Some("interface".into());
    for (card, nic) in nics.iter_mut().enumerate().skip(1) {
        nic.interface_type = Some(if card % 2 == 0 { "efa" } else { "efa-only" }.into());
    }
    nics
}

#[tokio::test]
async fn gb200_ultraservers_are_bought_as_capacity_blocks_and_launched_into_their_reservations() {
    use aws_sdk_ec2::types::{
        CapacityReservationInstancePlatform, CapacityReservationSpecification, CapacityReservationTarget, InstanceMarketOptionsRequest,
        LaunchTemplateInstanceMarketOptionsRequest, MarketType,
    };
    let ep = aws();
    let client = ec2(ep, "us-west-1");
    let (_, subnet, sg) = network(&client, "us-west-1a").await;

    // The type is known, with 17 network cards (card 0 ENA only) and 16 EFA interfaces.
    let types = client.describe_instance_types().instance_types(InstanceType::P6eGb20036xlarge).send().await.unwrap();
    let info = types.instance_types()[0].network_info().unwrap();
    assert_eq!(info.maximum_network_cards(), Some(17));
    assert_eq!(info.efa_info().and_then(|e| e.maximum_efa_interfaces()), Some(16));
    assert_eq!(info.network_cards().len(), 17);
    let offered = client
        .describe_instance_type_offerings()
        .location_type(aws_sdk_ec2::types::LocationType::AvailabilityZone)
        .filters(Filter::builder().name("instance-type").values("p6e-gb200.36xlarge").build())
        .send()
        .await
        .unwrap();
    assert!(offered.instance_type_offerings().iter().any(|o| o.location() == Some("us-west-1a")));

    // Offerings: only as UltraServers; an unknown UltraServer type is refused.
    let not_as_instances = client
        .describe_capacity_block_offerings()
        .instance_type("p6e-gb200.36xlarge")
        .instance_count(18)
        .capacity_duration_hours(24)
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&not_as_instances), "InvalidParameterCombination");
    assert!(message(&not_as_instances).contains("offered only as UltraServers"), "{}", message(&not_as_instances));
    let unknown_type = client
        .describe_capacity_block_offerings()
        .ultraserver_type("u-p6e-gb200x144")
        .capacity_duration_hours(24)
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&unknown_type), "InvalidParameterValue");
    let small =
        client.describe_capacity_block_offerings().ultraserver_type("u-p6e-gb200x36").capacity_duration_hours(24).send().await.unwrap();
    assert_eq!(small.capacity_block_offerings()[0].instance_count(), Some(9));
    assert_eq!(small.capacity_block_offerings()[0].ultraserver_count(), Some(1));
    let offerings = client
        .describe_capacity_block_offerings()
        .ultraserver_type("u-p6e-gb200x72")
        .ultraserver_count(2)
        .capacity_duration_hours(24)
        .send()
        .await
        .unwrap();
    let offer = &offerings.capacity_block_offerings()[0];
    assert_eq!(offer.instance_type(), Some("p6e-gb200.36xlarge"));
    assert_eq!(offer.instance_count(), Some(36));
    assert_eq!(offer.ultraserver_type(), Some("u-p6e-gb200x72"));
    assert_eq!(offer.ultraserver_count(), Some(2));

    // Buying it: one capacity reservation per UltraServer, listed in the block in that order.
    let unknown_offer = client
        .purchase_capacity_block()
        .capacity_block_offering_id("cb-00000000000000000")
        .instance_platform(CapacityReservationInstancePlatform::LinuxUnix)
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&unknown_offer), "InvalidCapacityBlockOfferingIdNotFound");
    let bought = client
        .purchase_capacity_block()
        .capacity_block_offering_id(offer.capacity_block_offering_id().unwrap())
        .instance_platform(CapacityReservationInstancePlatform::LinuxUnix)
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::CapacityBlock)
                .tags(Tag::builder().key("team").value("ml").build())
                .build(),
        )
        .send()
        .await
        .unwrap();
    // (aws-sdk-ec2 1.195 predates the answer's CapacityReservations; the block lists their ids.)
    let block = &bought.capacity_blocks()[0];
    let block_id = block.capacity_block_id().unwrap().to_owned();
    assert!(block_id.starts_with("cb-"));
    let listed =
        client.describe_capacity_reservations().set_capacity_reservation_ids(Some(block.capacity_reservation_ids().to_vec())).send();
    let listed = listed.await.unwrap();
    let reservations = listed.capacity_reservations();
    assert_eq!(reservations.len(), 2);
    assert_eq!(bought.capacity_reservation().and_then(|r| r.capacity_reservation_id()), reservations[0].capacity_reservation_id());
    for r in reservations {
        assert_eq!(r.total_instance_count(), Some(18));
        assert_eq!(r.available_instance_count(), Some(18));
        assert_eq!(r.instance_type(), Some("p6e-gb200.36xlarge"));
        assert_eq!(r.reservation_type().map(|t| t.as_str()), Some("capacity-block"));
    }
    assert_eq!(reservations[0].capacity_block_id(), Some(block_id.as_str()));
    let ids: Vec<&str> = reservations.iter().filter_map(|r| r.capacity_reservation_id()).collect();
    assert_eq!(block.capacity_reservation_ids().iter().map(String::as_str).collect::<Vec<_>>(), ids);
    let described = client.describe_capacity_blocks().capacity_block_ids(&block_id).send().await.unwrap();
    let found = &described.capacity_blocks()[0];
    assert_eq!(found.ultraserver_type(), Some("u-p6e-gb200x72"));
    assert_eq!(found.state().map(|s| s.as_str()), Some("active"));
    assert_eq!(found.capacity_reservation_ids(), block.capacity_reservation_ids());
    assert_eq!(found.tags()[0].key(), Some("team"));
    let by_filter = client
        .describe_capacity_blocks()
        .filters(Filter::builder().name("ultraserver-type").values("ultraservers").build())
        .send()
        .await
        .unwrap();
    assert_eq!(by_filter.capacity_blocks().len(), 1);
    let unknown_block = client.describe_capacity_blocks().capacity_block_ids("cb-00000000000000000").send().await.unwrap_err();
    assert_eq!(code(&unknown_block), "InvalidCapacityBlockId.NotFound");

    // Card 0 of p6e-gb200 takes ENA only, as on p6-b300.
    let mut efa_on_card0 = gb200_layout(&subnet, &sg);
    efa_on_card0[0].interface_type = Some("efa".into());
    let template = |name: &str, nics: Vec<LaunchTemplateInstanceNetworkInterfaceSpecificationRequest>| {
        let data = RequestLaunchTemplateData::builder()
            .instance_type(InstanceType::P6eGb20036xlarge)
            .image_id(AMI)
            .instance_market_options(LaunchTemplateInstanceMarketOptionsRequest::builder().market_type(MarketType::CapacityBlock).build())
            .set_network_interfaces(Some(nics))
            .build();
        client.create_launch_template().launch_template_name(name).launch_template_data(data).send()
    };
    template("gb200-card0", efa_on_card0).await.unwrap();
    template("gb200-lt", gb200_layout(&subnet, &sg)).await.unwrap();
    let target = |rid: &str| {
        CapacityReservationSpecification::builder()
            .capacity_reservation_target(CapacityReservationTarget::builder().capacity_reservation_id(rid).build())
            .build()
    };
    let launch = |lt: &str, count: i32, reservation: Option<&str>| {
        client
            .run_instances()
            .launch_template(LaunchTemplateSpecification::builder().launch_template_name(lt).version("$Latest").build())
            .min_count(count)
            .max_count(count)
            .set_capacity_reservation_specification(reservation.map(target))
            .send()
    };
    let card0 = launch("gb200-card0", 1, Some(ids[0])).await.unwrap_err();
    assert_eq!(code(&card0), "InvalidParameterCombination");
    assert!(message(&card0).contains("ENA only"), "{}", message(&card0));

    // Refusals: no Capacity Block, an unknown reservation, another type's reservation, more than it holds.
    let no_block = launch("gb200-lt", 1, None).await.unwrap_err();
    assert_eq!(code(&no_block), "InvalidParameterCombination");
    assert!(message(&no_block).contains("UltraServer Capacity Block"), "{}", message(&no_block));
    let unknown = launch("gb200-lt", 1, Some("cr-00000000000000000")).await.unwrap_err();
    assert_eq!(code(&unknown), "InvalidCapacityReservationId.NotFound");
    let wrong_type = client
        .run_instances()
        .image_id(AMI)
        .instance_type(InstanceType::P548xlarge)
        .instance_market_options(InstanceMarketOptionsRequest::builder().market_type(MarketType::CapacityBlock).build())
        .capacity_reservation_specification(target(ids[0]))
        .min_count(1)
        .max_count(1)
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&wrong_type), "InvalidParameterValue");
    assert!(message(&wrong_type).contains("does not match"), "{}", message(&wrong_type));
    let too_many = launch("gb200-lt", 19, Some(ids[0])).await.unwrap_err();
    assert_eq!(code(&too_many), "ReservationCapacityExceeded");

    // A whole UltraServer: 18 nodes into its reservation, each showing it; the slots come back on terminate.
    let run = launch("gb200-lt", 18, Some(ids[1])).await.unwrap();
    assert_eq!(run.instances().len(), 18);
    let available = |rid: &str| {
        let client = client.clone();
        let rid = rid.to_owned();
        async move {
            let out = client.describe_capacity_reservations().capacity_reservation_ids(&rid).send().await.unwrap();
            out.capacity_reservations()[0].available_instance_count().unwrap()
        }
    };
    assert_eq!(available(ids[1]).await, 0);
    assert_eq!(available(ids[0]).await, 18);
    let first = run.instances()[0].instance_id().unwrap().to_owned();
    let described = client.describe_instances().instance_ids(&first).send().await.unwrap();
    let instance = &described.reservations()[0].instances()[0];
    assert_eq!(instance.capacity_reservation_id(), Some(ids[1]));
    let spec_target = instance.capacity_reservation_specification().and_then(|s| s.capacity_reservation_target());
    assert_eq!(spec_target.and_then(|t| t.capacity_reservation_id()), Some(ids[1]));
    assert_eq!(instance.network_interfaces().iter().filter(|n| n.interface_type() == Some("efa")).count(), 8);
    let full = launch("gb200-lt", 1, Some(ids[1])).await.unwrap_err();
    assert_eq!(code(&full), "ReservationCapacityExceeded");
    client.terminate_instances().instance_ids(&first).send().await.unwrap();
    assert_eq!(available(ids[1]).await, 1);
    launch("gb200-lt", 1, Some(ids[1])).await.unwrap();
    assert_eq!(available(ids[1]).await, 0);

    // The block and its reservations are bought, not made: the inventory lists them.
    let inventory = admin(ep, "GET", "inventory", None);
    assert!(inventory["resources"]["ec2"]["capacity_blocks"].as_array().unwrap().iter().any(|b| b == block_id.as_str()));
    let listed = inventory["resources"]["ec2"]["capacity_reservations"].as_array().unwrap();
    assert!(ids.iter().all(|id| listed.iter().any(|r| r == id)));
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
    // Deleting takes a while (DELETING); then the association is not found.
    let started = Instant::now();
    let missing_dra = loop {
        match fsx.describe_data_repository_associations().association_ids(&dra_id).send().await {
            Err(e) => break e,
            Ok(_) => assert!(started.elapsed() < Duration::from_secs(10), "{dra_id} never went away"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
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

fn in_cidr(ip: &str, cidr: &str) -> bool {
    let (net, len) = cidr.split_once('/').unwrap();
    let (ip, net): (std::net::Ipv4Addr, std::net::Ipv4Addr) = (ip.parse().unwrap(), net.parse().unwrap());
    let mask = u32::MAX.checked_shl(32 - len.parse::<u32>().unwrap()).unwrap_or(0);
    u32::from(ip) & mask == u32::from(net) & mask
}

#[tokio::test]
async fn a_public_ip_setting_on_a_multi_interface_launch_is_refused_as_ec2_does() {
    let ep = aws();
    let client = ec2(ep, "ap-south-1");
    let (_, subnet, sg) = network(&client, "ap-south-1a").await;
    let template = |name: &str, cards: i32| {
        let mut nics = efa_layout(cards, &subnet, &sg);
        nics[0].associate_public_ip_address = Some(false);
        let data = RequestLaunchTemplateData::builder()
            .instance_type(InstanceType::P548xlarge)
            .image_id(AMI)
            .set_network_interfaces(Some(nics))
            .build();
        let client = client.clone();
        let name = name.to_owned();
        async move {
            client.create_launch_template().launch_template_name(&name).launch_template_data(data).send().await.unwrap();
            client
                .run_instances()
                .launch_template(LaunchTemplateSpecification::builder().launch_template_name(&name).build())
                .min_count(1)
                .max_count(1)
                .send()
                .await
        }
    };
    // EC2: "The associatePublicIPAddress parameter cannot be specified when launching with multiple network
    // interfaces", even when it is false.
    let refused = template("many-nics", 4).await.unwrap_err();
    assert_eq!(code(&refused), "InvalidParameterCombination");
    assert!(message(&refused).contains("multiple network interfaces"), "{}", message(&refused));
    // One interface may carry it.
    template("one-nic", 1).await.unwrap();
}

#[tokio::test]
async fn launch_template_interfaces_take_unique_addresses_from_their_subnet_and_efa_only_ones_none() {
    let ep = aws();
    let client = ec2(ep, "ap-southeast-2");
    let vpc = client.create_vpc().cidr_block("10.1.0.0/16").send().await.unwrap().vpc.unwrap().vpc_id.unwrap();
    let cidr = "10.1.4.0/26";
    let subnet = client
        .create_subnet()
        .vpc_id(&vpc)
        .cidr_block(cidr)
        .availability_zone("ap-southeast-2a")
        .send()
        .await
        .unwrap()
        .subnet
        .unwrap()
        .subnet_id
        .unwrap();
    let sg = client.create_security_group().group_name("efa").description("efa").vpc_id(&vpc).send().await.unwrap().group_id.unwrap();
    // Card 0 EFA, card 1 a second EFA (with IP), cards 2-3 EFA-only (no IP).
    let mut nics = efa_layout(4, &subnet, &sg);
    nics[1].interface_type = Some("efa".into());
    let data = RequestLaunchTemplateData::builder()
        .instance_type(InstanceType::P548xlarge)
        .image_id(AMI)
        .set_network_interfaces(Some(nics))
        .build();
    client.create_launch_template().launch_template_name("ips-lt").launch_template_data(data).send().await.unwrap();
    for _ in 0..2 {
        client
            .run_instances()
            .launch_template(LaunchTemplateSpecification::builder().launch_template_name("ips-lt").build())
            .min_count(3)
            .max_count(3)
            .send()
            .await
            .unwrap();
    }
    let found = client.describe_instances().send().await.unwrap();
    let instances: Vec<_> = found.reservations().iter().flat_map(|r| r.instances()).collect();
    assert_eq!(instances.len(), 6);
    let (network, broadcast) = ("10.1.4.0", "10.1.4.63");
    let mut primaries = std::collections::BTreeSet::new();
    let mut all = std::collections::BTreeSet::new();
    for instance in &instances {
        let ip = instance.private_ip_address().unwrap();
        assert!(in_cidr(ip, cidr) && ip != network && ip != broadcast, "{ip} is not a host address of {cidr}");
        assert!(primaries.insert(ip.to_owned()), "{ip} given to two instances");
        assert_eq!(instance.subnet_id(), Some(subnet.as_str()));
        assert_eq!(instance.vpc_id(), Some(vpc.as_str()));
        for nic in instance.network_interfaces() {
            let kind = nic.interface_type().unwrap_or_default();
            if kind == "efa-only" {
                assert!(nic.private_ip_address().is_none_or(str::is_empty), "an EFA-only interface got {:?}", nic.private_ip_address());
                assert!(nic.private_ip_addresses().iter().all(|a| a.private_ip_address().is_none_or(str::is_empty)));
                continue;
            }
            let ip = nic.private_ip_address().unwrap();
            assert!(
                in_cidr(ip, cidr) && ip != network && ip != broadcast,
                "{kind} interface got {ip}, outside the host addresses of {cidr}"
            );
            assert!(all.insert(ip.to_owned()), "{ip} given to two interfaces");
        }
    }
    assert_eq!(all.len(), 12, "two addressed interfaces per instance: {all:?}");
}

#[tokio::test]
async fn data_repository_associations_delete_asynchronously_and_a_path_holds_one() {
    use aws_sdk_fsx::error::ProvideErrorMetadata;
    use aws_sdk_fsx::types::{CreateFileSystemLustreConfiguration, FileSystemType, LustreDeploymentType};
    let ep = aws();
    let client = ec2(ep, "eu-north-1");
    let (_, subnet, sg) = network(&client, "eu-north-1a").await;
    let fsx = fsx(ep, "eu-north-1");
    let id = fsx
        .create_file_system()
        .file_system_type(FileSystemType::Lustre)
        .storage_capacity(1200)
        .subnet_ids(&subnet)
        .security_group_ids(&sg)
        .lustre_configuration(
            CreateFileSystemLustreConfiguration::builder()
                .deployment_type(LustreDeploymentType::Persistent2)
                .per_unit_storage_throughput(125)
                .build(),
        )
        .send()
        .await
        .unwrap()
        .file_system
        .unwrap()
        .file_system_id
        .unwrap();
    let link = |path: &str, repo: &str| {
        fsx.create_data_repository_association().file_system_id(&id).file_system_path(path).data_repository_path(repo).send()
    };
    let root = link("/", "s3://bucket/a").await.unwrap().association.unwrap().association_id.unwrap();
    // One path, one association; nested paths overlap.
    let same = link("/", "s3://bucket/b").await.unwrap_err();
    assert_eq!(same.code(), Some("BadRequest"), "{same:?}");
    let nested = link("/data", "s3://bucket/c").await.unwrap_err();
    assert_eq!(nested.code(), Some("BadRequest"), "{nested:?}");

    // Deletion takes a while: DELETING, the path still taken, then NotFound.
    let deleted = fsx.delete_data_repository_association().association_id(&root).delete_data_in_file_system(false).send().await.unwrap();
    assert_eq!(deleted.lifecycle().map(|l| l.as_str()), Some("DELETING"));
    let described = fsx.describe_data_repository_associations().association_ids(&root).send().await.unwrap();
    assert_eq!(described.associations()[0].lifecycle().map(|l| l.as_str()), Some("DELETING"));
    let while_deleting = link("/", "s3://bucket/b").await.unwrap_err();
    assert_eq!(while_deleting.code(), Some("BadRequest"), "{while_deleting:?}");
    let started = Instant::now();
    loop {
        match fsx.describe_data_repository_associations().association_ids(&root).send().await {
            Err(e) if e.code() == Some("DataRepositoryAssociationNotFound") => break,
            Ok(_) => assert!(started.elapsed() < Duration::from_secs(10), "still there"),
            Err(e) => panic!("{e:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // At most 8 associations per file system; /p1 and /p10 are different paths.
    for i in 1..=8 {
        link(&format!("/p{i}"), &format!("s3://bucket/p{i}")).await.unwrap();
    }
    let ninth = link("/p10", "s3://bucket/p10").await.unwrap_err();
    assert_eq!(ninth.code(), Some("BadRequest"), "{ninth:?}");
    assert!(ninth.message().unwrap_or_default().contains('8'), "{ninth:?}");
    fsx.delete_file_system().file_system_id(&id).send().await.unwrap();
}

#[tokio::test]
async fn file_system_sizes_tiers_and_capacity_steps_fsx_does_not_offer_are_refused() {
    use aws_sdk_fsx::error::ProvideErrorMetadata;
    use aws_sdk_fsx::types::{CreateFileSystemLustreConfiguration, FileSystemLifecycle, FileSystemType, LustreDeploymentType};
    let ep = aws();
    let client = ec2(ep, "us-east-2");
    let (_, subnet, sg) = network(&client, "us-east-2a").await;
    let fsx = fsx(ep, "us-east-2");
    let create = |capacity: i32, deployment: LustreDeploymentType, throughput: i32| {
        fsx.create_file_system()
            .file_system_type(FileSystemType::Lustre)
            .storage_capacity(capacity)
            .subnet_ids(&subnet)
            .security_group_ids(&sg)
            .lustre_configuration(
                CreateFileSystemLustreConfiguration::builder().deployment_type(deployment).per_unit_storage_throughput(throughput).build(),
            )
            .send()
    };
    // StorageCapacity for PERSISTENT_2, PERSISTENT_1 and SCRATCH_2 SSD: 1200, 2400, or a multiple of 2400 GiB.
    for (capacity, deployment, throughput) in [
        (3000, LustreDeploymentType::Persistent2, 250),
        (1000, LustreDeploymentType::Persistent2, 250),
        (3600, LustreDeploymentType::Persistent1, 200),
    ] {
        let e = create(capacity, deployment.clone(), throughput).await.unwrap_err();
        assert_eq!(e.code(), Some("BadRequest"), "{capacity} {deployment:?}: {e:?}");
        assert!(e.message().unwrap_or_default().contains("2400"), "{e:?}");
    }
    // PERSISTENT_2 throughput per TiB: 125, 250, 500 or 1000.
    let e = create(2400, LustreDeploymentType::Persistent2, 200).await.unwrap_err();
    assert_eq!(e.code(), Some("BadRequest"), "{e:?}");
    assert!(e.message().unwrap_or_default().contains("125, 250, 500"), "{e:?}");
    // The good ones.
    let id = create(1200, LustreDeploymentType::Persistent2, 1000).await.unwrap().file_system.unwrap().file_system_id.unwrap();
    create(7200, LustreDeploymentType::Persistent2, 125).await.unwrap();
    let started = Instant::now();
    while fsx.describe_file_systems().file_system_ids(&id).send().await.unwrap().file_systems()[0].lifecycle()
        != Some(&FileSystemLifecycle::Available)
    {
        assert!(started.elapsed() < Duration::from_secs(10));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Growing goes in steps of 2400 GiB: 1200 -> 3600 is no multiple of 2400, 1200 -> 2400 is.
    let e = fsx.update_file_system().file_system_id(&id).storage_capacity(3600).send().await.unwrap_err();
    assert_eq!(e.code(), Some("BadRequest"), "{e:?}");
    fsx.update_file_system().file_system_id(&id).storage_capacity(2400).send().await.unwrap();
}

// -------------------------------------------------------------------------------- day 2 (issue 24)

/// `count` small instances in `region`: their ids, in launch order.
async fn small_instances(client: &aws_sdk_ec2::Client, zone: &str, count: i32) -> Vec<String> {
    let (_, subnet, _) = network(client, zone).await;
    let run = client
        .run_instances()
        .image_id(AMI)
        .instance_type(InstanceType::C5Large)
        .min_count(count)
        .max_count(count)
        .subnet_id(&subnet)
        .send()
        .await
        .unwrap();
    run.instances().iter().map(|i| i.instance_id().unwrap().to_owned()).collect()
}

/// Every instance status of the region, page by page with `MaxResults` = `page` (all instances, as the
/// provider asks): the statuses and how many calls it took.
async fn all_statuses(client: &aws_sdk_ec2::Client, page: i32) -> (Vec<aws_sdk_ec2::types::InstanceStatus>, usize) {
    let (mut out, mut calls, mut token) = (Vec::new(), 0, None);
    loop {
        let answer =
            client.describe_instance_status().include_all_instances(true).max_results(page).set_next_token(token).send().await.unwrap();
        calls += 1;
        out.extend(answer.instance_statuses().iter().cloned());
        token = answer.next_token().map(str::to_owned);
        if token.is_none() {
            return (out, calls);
        }
    }
}

fn status_of<'a>(statuses: &'a [aws_sdk_ec2::types::InstanceStatus], id: &str) -> &'a aws_sdk_ec2::types::InstanceStatus {
    statuses.iter().find(|s| s.instance_id() == Some(id)).unwrap_or_else(|| panic!("no status of {id}"))
}

fn summary(s: Option<&aws_sdk_ec2::types::InstanceStatusSummary>) -> &str {
    s.and_then(|s| s.status()).map(|s| s.as_str()).unwrap_or_default()
}

#[tokio::test]
async fn instance_status_lists_impaired_checks_and_scheduled_events_of_every_instance_page_by_page() {
    let ep = aws();
    let client = ec2(ep, "eu-west-2");
    let ids = small_instances(&client, "eu-west-2a", 7).await;
    let impair = |body: serde_json::Value| admin(ep, "POST", "out-of-band", Some(body));
    impair(serde_json::json!({"action": "impair", "id": ids[0], "check": "system", "since": "2026-12-01T10:02:00Z"}));
    impair(serde_json::json!({"action": "impair", "id": ids[1], "event": "instance-retirement", "not_before": "2026-12-05T00:00:00Z"}));
    impair(serde_json::json!({"action": "impair", "id": ids[2], "check": "instance"}));
    client.terminate_instances().instance_ids(&ids[6]).send().await.unwrap();

    // All seven (the terminated one too) in pages of 5: two calls, whatever asks about which instance.
    let (statuses, calls) = all_statuses(&client, 5).await;
    assert_eq!((statuses.len(), calls), (7, 2));
    let system = status_of(&statuses, &ids[0]).system_status().unwrap();
    assert_eq!(summary(Some(system)), "impaired");
    let detail = &system.details()[0];
    assert_eq!(detail.status().map(|s| s.as_str()), Some("failed"));
    assert_eq!(
        detail.impaired_since().map(|t| t.secs()),
        Some(
            aws_sdk_ec2::primitives::DateTime::from_str("2026-12-01T10:02:00Z", aws_sdk_ec2::primitives::DateTimeFormat::DateTime)
                .unwrap()
                .secs()
        )
    );
    assert_eq!(summary(status_of(&statuses, &ids[0]).instance_status()), "ok");
    let events = status_of(&statuses, &ids[1]).events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].code().map(|c| c.as_str()), Some("instance-retirement"));
    assert!(events[0].instance_event_id().is_some_and(|e| e.starts_with("instance-event-")));
    assert!(!events[0].description().unwrap().starts_with("[Completed]"));
    assert_eq!(summary(status_of(&statuses, &ids[2]).instance_status()), "impaired");
    let gone = status_of(&statuses, &ids[6]);
    assert_eq!(gone.instance_state().and_then(|s| s.name()).map(|s| s.as_str()), Some("terminated"));
    assert_eq!(summary(gone.system_status()), "not-applicable");

    // Without IncludeAllInstances only running instances; a filter on the check.
    let running = client.describe_instance_status().send().await.unwrap();
    assert_eq!(running.instance_statuses().len(), 6);
    let filtered = client
        .describe_instance_status()
        .filters(Filter::builder().name("system-status.status").values("impaired").build())
        .send()
        .await
        .unwrap();
    let impaired: Vec<&str> = filtered.instance_statuses().iter().filter_map(|s| s.instance_id()).collect();
    assert_eq!(impaired, [ids[0].as_str()]);

    // EC2's own refusals: a page size beside instance ids, a page size out of range, an unknown id.
    let both = client.describe_instance_status().instance_ids(&ids[0]).max_results(5).send().await.unwrap_err();
    assert_eq!(code(&both), "InvalidParameterCombination");
    let small = client.describe_instance_status().max_results(2).send().await.unwrap_err();
    assert_eq!(code(&small), "InvalidParameterValue");
    let unknown = client.describe_instance_status().instance_ids("i-0123456789abcdef0").send().await.unwrap_err();
    assert_eq!(code(&unknown), "InvalidInstanceID.NotFound");

    // A reboot clears an impaired instance check, not the host's system check; heal clears both and
    // completes the events.
    client.reboot_instances().instance_ids(&ids[2]).instance_ids(&ids[0]).send().await.unwrap();
    let (statuses, _) = all_statuses(&client, 1000).await;
    assert_eq!(summary(status_of(&statuses, &ids[2]).instance_status()), "ok");
    assert_eq!(summary(status_of(&statuses, &ids[0]).system_status()), "impaired");
    impair(serde_json::json!({"action": "heal", "id": ids[0]}));
    impair(serde_json::json!({"action": "heal", "id": ids[1]}));
    let (statuses, _) = all_statuses(&client, 1000).await;
    assert_eq!(summary(status_of(&statuses, &ids[0]).system_status()), "ok");
    let events = status_of(&statuses, &ids[1]).events();
    assert!(events[0].description().unwrap().starts_with("[Completed]"), "{events:?}");

    // An impair the emulator cannot make sense of is the admin API's 400; an unknown id its 404.
    let (status, body) = hpc_emulators::harness::admin_raw(
        ep,
        "POST",
        "out-of-band",
        Some(serde_json::json!({"action": "impair", "id": ids[3], "check": "disk"})),
    );
    assert_eq!(status, 400, "{body}");
    let (status, _) = hpc_emulators::harness::admin_raw(
        ep,
        "POST",
        "out-of-band",
        Some(serde_json::json!({"action": "impair", "id": "i-0nope", "check": "system"})),
    );
    assert_eq!(status, 404);
}

/// The instance ids DescribeInstanceStatus answers for `filters` (`(name, values)`), sorted.
async fn status_ids(client: &aws_sdk_ec2::Client, filters: &[(&str, &[&str])], all: bool) -> Vec<String> {
    let mut ask = client.describe_instance_status().include_all_instances(all);
    for (name, values) in filters {
        ask = ask.filters(Filter::builder().name(*name).set_values(Some(values.iter().map(|v| (*v).to_owned()).collect())).build());
    }
    let mut ids: Vec<String> =
        ask.send().await.unwrap().instance_statuses().iter().filter_map(|s| s.instance_id()).map(str::to_owned).collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn instance_status_filters_are_anded_and_each_filters_values_ored() {
    // EC2's filters: several are joined with AND, the values of one with OR.
    let ep = aws();
    let client = ec2(ep, "ap-northeast-2");
    let here = small_instances(&client, "ap-northeast-2a", 5).await;
    let there = small_instances(&client, "ap-northeast-2b", 2).await;
    let impair = |body: serde_json::Value| admin(ep, "POST", "out-of-band", Some(body));
    impair(serde_json::json!({"action": "impair", "id": here[0], "check": "system"}));
    impair(serde_json::json!({"action": "impair", "id": here[1], "check": "instance"}));
    impair(serde_json::json!({"action": "impair", "id": here[2], "event": "system-reboot"}));
    impair(serde_json::json!({"action": "impair", "id": here[3], "event": "instance-retirement"}));
    impair(serde_json::json!({"action": "impair", "id": there[0], "check": "system", "event": "system-maintenance"}));
    // A stopped instance keeps its scheduled retirement; only IncludeAllInstances lists it.
    client.stop_instances().instance_ids(&here[3]).send().await.unwrap();
    let sorted = |ids: &[&String]| {
        let mut v: Vec<String> = ids.iter().map(|s| (*s).clone()).collect();
        v.sort();
        v
    };
    let zone_a: &[&str] = &["ap-northeast-2a"];
    assert_eq!(
        status_ids(&client, &[("availability-zone", zone_a), ("system-status.status", &["impaired"])], false).await,
        sorted(&[&here[0]])
    );
    assert_eq!(status_ids(&client, &[("system-status.status", &["impaired"])], false).await, sorted(&[&here[0], &there[0]]));
    assert_eq!(
        status_ids(&client, &[("availability-zone", zone_a), ("instance-status.status", &["impaired"])], false).await,
        sorted(&[&here[1]])
    );
    let codes: &[&str] = &["instance-retirement", "instance-stop", "system-reboot", "instance-reboot", "system-maintenance"];
    assert_eq!(status_ids(&client, &[("availability-zone", zone_a), ("event.code", codes)], true).await, sorted(&[&here[2], &here[3]]));
    assert_eq!(status_ids(&client, &[("availability-zone", zone_a), ("event.code", codes)], false).await, sorted(&[&here[2]]));
    let both: &[&str] = &["ap-northeast-2a", "ap-northeast-2b"];
    assert_eq!(
        status_ids(&client, &[("availability-zone", both), ("event.code", codes)], true).await,
        sorted(&[&here[2], &here[3], &there[0]])
    );
    assert_eq!(status_ids(&client, &[("availability-zone", both), ("event.code", &["instance-stop"])], true).await, Vec::<String>::new());
    // A filter EC2 does not have is refused.
    let unknown =
        client.describe_instance_status().filters(Filter::builder().name("tag:hpc:cluster").values("x").build()).send().await.unwrap_err();
    assert_eq!(code(&unknown), "InvalidParameterValue");
}

#[tokio::test]
async fn a_node_publishes_its_selfcheck_verdict_as_a_tag_that_describe_instances_returns() {
    let ep = aws();
    let client = ec2(ep, "eu-west-3");
    let ids = small_instances(&client, "eu-west-3a", 2).await;
    // What the node's self-check does with its own instance id (CreateTags is EC2's per-instance channel).
    client
        .create_tags()
        .resources(&ids[1])
        .tags(Tag::builder().key("hpc:selfcheck").value("fail-gpus-7-of-8").build())
        .send()
        .await
        .unwrap();
    let out = client
        .describe_instances()
        .filters(Filter::builder().name("tag:hpc:selfcheck").values("fail-gpus-7-of-8").build())
        .send()
        .await
        .unwrap();
    let found: Vec<&str> = out.reservations().iter().flat_map(|r| r.instances()).filter_map(|i| i.instance_id()).collect();
    assert_eq!(found, [ids[1].as_str()]);
    let tags = out.reservations()[0].instances()[0].tags();
    assert!(tags.iter().any(|t| t.key() == Some("hpc:selfcheck") && t.value() == Some("fail-gpus-7-of-8")), "{tags:?}");
}

/// EC2 launches MinCount instances or none, whatever else runs at the same moment: launches into one subnet
/// from many clients at once (each with 32 interfaces an instance, while others list the instances) make
/// exactly the instances their answers name, and nothing besides. moto builds a launch one instance at a
/// time, so a launch that fails half-way, or two that interleave, could leave instances nobody was told of
/// (an acceptance run once found three such nodes without names in a cluster).
#[tokio::test]
async fn concurrent_launches_make_exactly_the_instances_they_answer() {
    let ep = aws();
    let client = ec2(ep, "af-south-1");
    let (_, subnet, sg) = network(&client, "af-south-1a").await;
    let data = RequestLaunchTemplateData::builder()
        .instance_type(InstanceType::P548xlarge)
        .image_id(AMI)
        .set_network_interfaces(Some(efa_layout(32, &subnet, &sg)))
        .build();
    client.create_launch_template().launch_template_name("busy-lt").launch_template_data(data).send().await.unwrap();
    let tags = TagSpecification::builder()
        .resource_type(ResourceType::Instance)
        .tags(Tag::builder().key("hpc:cluster").value("busy").build())
        .build();
    let mut tasks = Vec::new();
    for i in 0..6 {
        let (launcher, tags) = (client.clone(), tags.clone());
        tasks.push(tokio::spawn(async move {
            launcher
                .run_instances()
                .launch_template(LaunchTemplateSpecification::builder().launch_template_name("busy-lt").build())
                .min_count(4)
                .max_count(4)
                .client_token(format!("busy-{i}"))
                .tag_specifications(tags)
                .send()
                .await
                .map(|out| out.instances().iter().filter_map(|i| i.instance_id().map(str::to_owned)).collect::<Vec<_>>())
        }));
        let lister = client.clone();
        tasks.push(tokio::spawn(async move {
            let _ = lister.describe_instances().send().await;
            Ok(Vec::new())
        }));
    }
    let mut answered = std::collections::BTreeSet::new();
    for task in tasks {
        if let Ok(ids) = task.await.unwrap() {
            answered.extend(ids);
        }
    }
    assert!(!answered.is_empty(), "no launch succeeded");
    let found = client
        .describe_instances()
        .filters(Filter::builder().name("tag:hpc:cluster").values("busy").build())
        .filters(Filter::builder().name("instance-state-name").values("pending").values("running").build())
        .send()
        .await
        .unwrap();
    let made: std::collections::BTreeSet<String> =
        found.reservations().iter().flat_map(|r| r.instances()).filter_map(|i| i.instance_id().map(str::to_owned)).collect();
    assert_eq!(made, answered, "instances that no launch's answer named, or answers naming instances that do not exist");
    assert_eq!(answered.len() % 4, 0, "a launch of 4 made some but not all: {}", answered.len());
}

/// A launch the subnet has no addresses left for launches nothing, as EC2 does
/// (InsufficientFreeAddressesInSubnet): 4 instances of 3 addressed interfaces each need 12 addresses, a /28
/// has 11. moto builds the instances one at a time and would otherwise keep the three it made before it ran
/// out, which no answer names.
#[tokio::test]
async fn a_launch_the_subnet_cannot_address_makes_nothing() {
    let ep = aws();
    let client = ec2(ep, "me-south-1");
    let (_, subnet, sg) = network_of(&client, "me-south-1a", "10.9.0.0/28").await;
    let nics: Vec<_> = (0..3)
        .map(|card| {
            LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder()
                .network_card_index(card)
                .device_index(if card == 0 { 0 } else { 1 })
                .interface_type("efa")
                .subnet_id(&subnet)
                .groups(&sg)
                .build()
        })
        .collect();
    let data = RequestLaunchTemplateData::builder()
        .instance_type(InstanceType::P548xlarge)
        .image_id(AMI)
        .set_network_interfaces(Some(nics))
        .build();
    client.create_launch_template().launch_template_name("tight-lt").launch_template_data(data).send().await.unwrap();
    let launch = client
        .run_instances()
        .launch_template(LaunchTemplateSpecification::builder().launch_template_name("tight-lt").build())
        .min_count(4)
        .max_count(4)
        .send()
        .await;
    let err = launch.expect_err("4 x 3 addresses launched into a /28");
    assert_eq!(code(&err), "InsufficientFreeAddressesInSubnet", "{}", message(&err));
    let found = client
        .describe_instances()
        .filters(Filter::builder().name("subnet-id").values(&subnet).build())
        .filters(Filter::builder().name("instance-state-name").values("pending").values("running").build())
        .send()
        .await
        .unwrap();
    let left: Vec<_> = found.reservations().iter().flat_map(|r| r.instances()).filter_map(|i| i.instance_id()).collect();
    assert!(left.is_empty(), "a failed launch left {left:?}");
    // And the addresses are free again: one instance of three interfaces fits.
    client
        .run_instances()
        .launch_template(LaunchTemplateSpecification::builder().launch_template_name("tight-lt").build())
        .min_count(1)
        .max_count(1)
        .send()
        .await
        .unwrap();
}
