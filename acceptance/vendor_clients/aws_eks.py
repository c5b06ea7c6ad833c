"""AWS's own SDK (boto3) reads back the GPU node pool the provider made on the AWS emulator's EKS (moto +
hpc_moto.py): the node group (size, labels, taint, capacity type, owner marker), the launch template it
names (one EFA interface per network card, the cluster's security group on each, no subnet, the placement
group); then, as another team would, makes a node group of its own in the same cluster over a launch
template of its own, rolls it to a new template version (UpdateNodegroupVersion), tags it, and deletes both.

    python aws_eks.py --endpoint http://127.0.0.1:PORT --region us-east-1 --cluster ml-prod --pool gpu \
        --owner M --subnet subnet-... --efa 32

Every check runs even when an earlier one fails; prints one JSON summary on stdout (its `problems` list each
mismatch and SDK exception), and exits 1 listing them on stderr.
"""

import argparse
import os
import sys
import time

from vendor_report import Mismatch, Report, expect  # noqa: E402,F401 - before this directory leaves the path

sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import boto3  # noqa: E402
import botocore.exceptions  # noqa: E402



def main():
    p = argparse.ArgumentParser()
    for flag in ("endpoint", "region", "cluster", "pool", "owner", "subnet", "efa"):
        p.add_argument(f"--{flag}", required=True)
    a = p.parse_args()
    session = boto3.session.Session(aws_access_key_id="test", aws_secret_access_key="test", region_name=a.region)
    ec2 = session.client("ec2", endpoint_url=a.endpoint)
    eks = session.client("eks", endpoint_url=a.endpoint)
    report = Report('boto3')
    summary = report.summary

    step = report.step

    def pool():
        cluster = eks.describe_cluster(name=a.cluster)["cluster"]
        cluster_sg = cluster["resourcesVpcConfig"]["clusterSecurityGroupId"]
        names = eks.list_nodegroups(clusterName=a.cluster)["nodegroups"]
        expect(a.pool in names, f"list_nodegroups({a.cluster}): {names}")
        g = eks.describe_nodegroup(clusterName=a.cluster, nodegroupName=a.pool)["nodegroup"]
        expect(g["status"] == "ACTIVE", f"node group status {g['status']}")
        expect(g["tags"].get("hpc:owner") == a.owner, f"node group tags {g['tags']}, expected hpc:owner={a.owner}")
        expect(g["subnets"] == [a.subnet], f"node group subnets {g['subnets']}")
        expect("instanceTypes" not in g or not g["instanceTypes"], f"instance types beside a launch template: {g.get('instanceTypes')}")
        lt = g["launchTemplate"]
        data = ec2.describe_launch_template_versions(LaunchTemplateId=lt["id"], Versions=[lt["version"]])["LaunchTemplateVersions"][0][
            "LaunchTemplateData"]
        nics = data.get("NetworkInterfaces", [])
        efa = sum(1 for n in nics if n.get("InterfaceType") in ("efa", "efa-only"))
        expect(efa == int(a.efa), f"{efa} EFA interfaces in {lt['name']}, expected {a.efa}")
        expect(all(cluster_sg in n.get("Groups", []) and not n.get("SubnetId") for n in nics),
               f"every interface in the cluster's security group {cluster_sg} and no subnet: {nics}")
        tags = eks.list_tags_for_resource(resourceArn=g["nodegroupArn"])["tags"]
        expect(tags.get("hpc:node-pool") == a.pool, f"list_tags_for_resource: {tags}")
        summary["pool"] = {
            "scaling": g["scalingConfig"], "labels": g.get("labels", {}), "taints": g.get("taints", []),
            "capacity_type": g.get("capacityType"), "ami_type": g.get("amiType"), "launch_template": lt["name"],
            "efa_interfaces": efa, "placement_group": (data.get("Placement") or {}).get("GroupName"),
            "update_config": g.get("updateConfig"), "node_repair": g.get("nodeRepairConfig"),
        }

    step("the pool (describe_cluster, list_nodegroups, describe_nodegroup, describe_launch_template_versions, list_tags_for_resource)", pool)

    def own_node_group():
        lt = ec2.create_launch_template(LaunchTemplateName="other-team-lt", LaunchTemplateData={"InstanceType": "m7i.2xlarge"})
        lt_id = lt["LaunchTemplate"]["LaunchTemplateId"]
        eks.create_nodegroup(clusterName=a.cluster, nodegroupName="other-team", nodeRole="arn:aws:iam::123456789012:role/other",
                             subnets=[a.subnet], launchTemplate={"id": lt_id, "version": "1"}, amiType="AL2023_x86_64_STANDARD",
                             scalingConfig={"minSize": 1, "maxSize": 3, "desiredSize": 1}, clientRequestToken="other-team-1")
        ec2.create_launch_template_version(LaunchTemplateId=lt_id, LaunchTemplateData={"InstanceType": "m7i.4xlarge"})
        update = eks.update_nodegroup_version(clusterName=a.cluster, nodegroupName="other-team",
                                              launchTemplate={"id": lt_id, "version": "2"})["update"]
        expect(update["type"] == "VersionUpdate", f"update_nodegroup_version answered {update}")
        arn = eks.describe_nodegroup(clusterName=a.cluster, nodegroupName="other-team")["nodegroup"]["nodegroupArn"]
        eks.tag_resource(resourceArn=arn, tags={"team": "other"})
        g = eks.describe_nodegroup(clusterName=a.cluster, nodegroupName="other-team")["nodegroup"]
        expect(g["launchTemplate"]["version"] == "2", f"rolled to version 2: {g['launchTemplate']}")
        expect(g["tags"].get("team") == "other", f"tags {g['tags']}")
        eks.delete_nodegroup(clusterName=a.cluster, nodegroupName="other-team")
        for _ in range(50):
            try:
                eks.describe_nodegroup(clusterName=a.cluster, nodegroupName="other-team")
                time.sleep(0.1)
            except botocore.exceptions.ClientError as e:
                expect(e.response["Error"]["Code"] == "ResourceNotFoundException", f"describe after delete: {e}")
                break
        else:
            raise Mismatch("other-team still described after its delete")
        ec2.delete_launch_template(LaunchTemplateId=lt_id)
        summary["own"] = {"node_group": "other-team", "rolled_to": g["launchTemplate"]["version"], "deleted": True}

    step("own node group (create_nodegroup, update_nodegroup_version, tag_resource, delete_nodegroup)", own_node_group)

    report.finish()


if __name__ == "__main__":
    main()
