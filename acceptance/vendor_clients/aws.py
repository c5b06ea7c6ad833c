"""AWS's own SDK (boto3) reads back what the provider made on the AWS emulator (moto + hpc_moto.py): the
fabric's VPC, subnet, security group and placement group, the cluster's launch template and instances
(each instance's private IP inside its subnet's CIDR), the FSx for Lustre filesystem; and creates and
deletes a security group of its own.

    python aws.py --endpoint http://127.0.0.1:PORT --region us-east-1 --fabric accfab --cluster acc \
        --filesystem accfs --owner-fabric M1 --owner-cluster M2 --owner-filesystem M3

Every check runs even when an earlier one fails; prints one JSON summary on stdout (its `problems` list each
mismatch and SDK exception), and exits 1 listing on stderr each mismatch and each SDK exception.
"""

import argparse
import ipaddress
import os
import sys

# This directory must not shadow the SDKs' packages.
from vendor_report import Mismatch, Report, expect  # noqa: E402,F401 - before this directory leaves the path

sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import boto3  # noqa: E402
import botocore.exceptions  # noqa: E402



def tags_of(thing, key="Tags"):
    return {t["Key"]: t["Value"] for t in thing.get(key) or []}


def main():
    p = argparse.ArgumentParser()
    for flag in ("endpoint", "region", "fabric", "cluster", "filesystem", "owner-fabric", "owner-cluster", "owner-filesystem"):
        p.add_argument(f"--{flag}", required=True)
    a = p.parse_args()
    session = boto3.session.Session(aws_access_key_id="test", aws_secret_access_key="test", region_name=a.region)
    ec2 = session.client("ec2", endpoint_url=a.endpoint)
    fsx = session.client("fsx", endpoint_url=a.endpoint)
    owner = "hpc:owner"
    report = Report('boto3')
    summary = report.summary

    step = report.step

    def owned(thing, marker, what, key="Tags"):
        tags = tags_of(thing, key)
        expect(tags.get(owner) == marker, f"{what}: tags {tags}, expected {owner}={marker}")

    # The fabric: VPC, subnet, security group, placement group.
    def fabric():
        by_fabric = [{"Name": "tag:hpc:fabric", "Values": [a.fabric]}]
        vpcs = ec2.describe_vpcs(Filters=by_fabric)["Vpcs"]
        expect(len(vpcs) == 1, f"describe_vpcs(tag:hpc:fabric={a.fabric}): {[v['VpcId'] for v in vpcs]}")
        owned(vpcs[0], a.owner_fabric, f"VPC {vpcs[0]['VpcId']}")
        subnets = ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpcs[0]["VpcId"]]}])["Subnets"]
        expect(subnets, f"no subnet in {vpcs[0]['VpcId']}")
        for s in subnets:
            owned(s, a.owner_fabric, f"subnet {s['SubnetId']}")
        groups = ec2.describe_security_groups(Filters=by_fabric)["SecurityGroups"]
        expect(len(groups) == 1, f"describe_security_groups(tag:hpc:fabric={a.fabric}): {[g['GroupId'] for g in groups]}")
        owned(groups[0], a.owner_fabric, f"security group {groups[0]['GroupId']}")
        pgs = ec2.describe_placement_groups(GroupNames=[f"{a.fabric}-pg"])["PlacementGroups"]
        expect(len(pgs) == 1 and pgs[0]["Strategy"] == "cluster", f"placement group {a.fabric}-pg: {pgs}")
        owned(pgs[0], a.owner_fabric, f"placement group {a.fabric}-pg")
        summary["fabric"] = {
            "vpc": vpcs[0]["VpcId"], "vpc_cidr": vpcs[0]["CidrBlock"],
            "subnets": {s["SubnetId"]: s["CidrBlock"] for s in subnets},
            "security_group": groups[0]["GroupId"],
            "security_group_rules": len(groups[0].get("IpPermissions", [])) + len(groups[0].get("IpPermissionsEgress", [])),
            "placement_group": pgs[0]["GroupName"], "placement_strategy": pgs[0]["Strategy"],
            "owner": tags_of(vpcs[0]).get(owner),
        }
        return {s["SubnetId"]: s["CidrBlock"] for s in subnets}

    subnets = step("fabric (describe_vpcs, describe_subnets, describe_security_groups, describe_placement_groups)", fabric) or {}

    def launch_templates():
        lts = ec2.describe_launch_templates(Filters=[{"Name": "tag:hpc:cluster", "Values": [a.cluster]}])["LaunchTemplates"]
        expect(lts, f"no launch template tagged hpc:cluster={a.cluster}")
        for lt in lts:
            owned(lt, a.owner_cluster, f"launch template {lt['LaunchTemplateName']}")
        versions = ec2.describe_launch_template_versions(LaunchTemplateId=lts[0]["LaunchTemplateId"], Versions=["$Latest"])
        data = versions["LaunchTemplateVersions"][0]["LaunchTemplateData"]
        summary["launch_templates"] = [{"name": lt["LaunchTemplateName"], "id": lt["LaunchTemplateId"],
                                        "latest_version": lt["LatestVersionNumber"]} for lt in lts]
        summary["launch_template_data"] = {"instance_type": data.get("InstanceType"),
                                           "network_interfaces": len(data.get("NetworkInterfaces", []))}

    step("describe_launch_templates, describe_launch_template_versions", launch_templates)

    summary["nodes"] = []

    def instances():
        pages = ec2.get_paginator("describe_instances").paginate(Filters=[
            {"Name": "tag:hpc:cluster", "Values": [a.cluster]},
            {"Name": "instance-state-name", "Values": ["pending", "running"]},
        ])
        found = [i for page in pages for r in page["Reservations"] for i in r["Instances"]]
        expect(found, f"no running instance tagged hpc:cluster={a.cluster}")
        outside = []
        for i in sorted(found, key=lambda i: tags_of(i).get("hpc:node", "")):
            owned(i, a.owner_cluster, f"instance {i['InstanceId']}")
            ip, subnet = i.get("PrivateIpAddress"), i.get("SubnetId")
            cidr = subnets.get(subnet)
            if cidr is None:
                cidr = ec2.describe_subnets(SubnetIds=[subnet])["Subnets"][0]["CidrBlock"]
            inside = ipaddress.ip_address(ip) in ipaddress.ip_network(cidr)
            if not inside:
                outside.append(f"{tags_of(i).get('hpc:node')} {i['InstanceId']}: {ip} not in its subnet {subnet} {cidr}")
            summary["nodes"].append({
                "name": tags_of(i).get("hpc:node"), "id": i["InstanceId"], "type": i["InstanceType"],
                "private_ip": ip, "subnet": subnet, "subnet_cidr": cidr, "ip_in_subnet": inside,
                "placement_group": i.get("Placement", {}).get("GroupName"),
                "efa_interfaces": sum(1 for n in i.get("NetworkInterfaces", []) if n.get("InterfaceType") in ("efa", "efa-only")),
            })
        expect(not outside, "private IPs outside their subnet's CIDR: " + "; ".join(outside))

    step("describe_instances (each private IP inside its subnet's CIDR)", instances)

    def filesystem():
        filesystems = fsx.describe_file_systems()["FileSystems"]
        mine = [f for f in filesystems if tags_of(f).get("hpc:filesystem") == a.filesystem]
        expect(len(mine) == 1, f"describe_file_systems tagged hpc:filesystem={a.filesystem}: {[f['FileSystemId'] for f in filesystems]}")
        fs = mine[0]
        owned(fs, a.owner_filesystem, f"file system {fs['FileSystemId']}")
        for s in fs.get("SubnetIds", []):
            expect(not subnets or s in subnets, f"file system in subnet {s}, not the fabric's {sorted(subnets)}")
        lustre = fs.get("LustreConfiguration", {})
        summary["filesystem"] = {
            "id": fs["FileSystemId"], "type": fs["FileSystemType"], "state": fs["Lifecycle"], "capacity_gib": fs["StorageCapacity"],
            "dns_name": fs.get("DNSName"), "mount_name": lustre.get("MountName"),
            "deployment_type": lustre.get("DeploymentType"), "throughput_per_tib": lustre.get("PerUnitStorageThroughput"),
        }

    step("fsx describe_file_systems", filesystem)

    def own_security_group():
        vpc = summary.get("fabric", {}).get("vpc")
        expect(vpc, "no fabric VPC to put the security group in")
        made = ec2.create_security_group(GroupName="vendor-client-sg", Description="made by boto3", VpcId=vpc,
                                         TagSpecifications=[{"ResourceType": "security-group", "Tags": [{"Key": "made-by", "Value": "boto3"}]}])
        gid = made["GroupId"]
        ec2.authorize_security_group_ingress(GroupId=gid, IpPermissions=[
            {"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22, "IpRanges": [{"CidrIp": "10.0.0.0/8"}]}])
        got = ec2.describe_security_groups(GroupIds=[gid])["SecurityGroups"][0]
        expect(tags_of(got).get("made-by") == "boto3" and got["VpcId"] == vpc, f"own security group: {got}")
        ec2.delete_security_group(GroupId=gid)
        try:
            ec2.describe_security_groups(GroupIds=[gid])
            raise Mismatch(f"{gid} still described after its delete")
        except botocore.exceptions.ClientError as e:
            expect(e.response["Error"]["Code"] == "InvalidGroup.NotFound", f"describe after delete: {e}")
        summary["own"] = {"security_group": gid, "deleted": True}

    step("own security group (create, authorize ingress, describe, delete)", own_security_group)

    report.finish()


if __name__ == "__main__":
    main()
