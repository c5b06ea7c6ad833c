"""Google's own client for the GKE node pool case on the Google Cloud emulator: google-api-python-client with
the Compute v1 and GKE (container v1) discovery documents it bundles, waiting on operations as a user's
script would.

    python gcp_gke.py --endpoint http://127.0.0.1:PORT --project P --mode estate
        makes the other team's estate: VPC ml-vpc with subnetwork ml-nodes in us-central1, and GKE cluster
        ml-prod (1.33, multi-networking and ADVANCED_DATAPATH on) with its default pool; prints their ids
    python gcp_gke.py ... --mode check --pool gpu --owner M --fabric F --count N --networks K
        reads the pool back (machine type, GPUs, zone, compact placement, GPU NIC networks, size through its
        managed instance group, labels, taints, owner label), then makes, resizes and deletes a pool of its own
    python gcp_gke.py ... --mode scale --pool gpu --count N [--taint-effect E] [--label-team T]
        resizes the pool, and changes a label and the GPU taint's effect, as someone outside the configuration
        would (setSize, then update under the pool's etag)
    python gcp_gke.py ... --mode remove
        deletes the estate

Prints one JSON summary on stdout (its `problems` list each mismatch and client exception) and exits 1 when
there are any.
"""

import argparse
import os
import sys
import time

from vendor_report import Mismatch, Report, expect  # noqa: E402,F401 - before this directory leaves the path

sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import google.auth.credentials  # noqa: E402
from googleapiclient import discovery  # noqa: E402

REGION, ZONE, VPC, SUBNET, CLUSTER = "us-central1", "us-central1-a", "ml-vpc", "ml-nodes", "ml-prod"


def last(url):
    return (url or "").rstrip("/").rsplit("/", 1)[-1]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--endpoint", required=True)
    p.add_argument("--project", required=True)
    p.add_argument("--mode", required=True, choices=["estate", "check", "scale", "remove"])
    p.add_argument("--pool")
    p.add_argument("--owner")
    p.add_argument("--fabric")
    p.add_argument("--count", type=int)
    p.add_argument("--networks", type=int, default=0)
    p.add_argument("--taint-effect")
    p.add_argument("--label-team")
    a = p.parse_args()
    creds = google.auth.credentials.AnonymousCredentials()
    ep = a.endpoint.rstrip("/")
    compute = discovery.build("compute", "v1", static_discovery=True, credentials=creds,
                              client_options={"api_endpoint": f"{ep}/compute/v1/"})
    gke = discovery.build("container", "v1", static_discovery=True, credentials=creds,
                          client_options={"api_endpoint": f"{ep}/"})
    clusters = gke.projects().locations().clusters()
    pools = clusters.nodePools()
    location = f"projects/{a.project}/locations/{REGION}"
    cluster_id = f"{location}/clusters/{CLUSTER}"
    report = Report("Google's clients")
    summary = report.summary
    step = report.step

    def compute_wait(op, scope):
        while op.get("status") != "DONE":
            time.sleep(0.1)
            if scope == "global":
                op = compute.globalOperations().get(project=a.project, operation=op["name"]).execute()
            else:
                op = compute.regionOperations().get(project=a.project, region=REGION, operation=op["name"]).execute()
        expect(not op.get("error"), f"operation {op['name']} failed: {op.get('error')}")

    def gke_wait(op):
        while op.get("status") != "DONE":
            time.sleep(0.1)
            op = gke.projects().locations().operations().get(name=f"{location}/operations/{op['name']}").execute()
        expect(not op.get("error"), f"GKE operation {op['name']} failed: {op.get('error')}")
        return op

    def size_of(pool):
        total = 0
        for url in pool.get("instanceGroupUrls", []):
            zone = url.split("/zones/")[1].split("/")[0]
            igm = compute.instanceGroupManagers().get(project=a.project, zone=zone, instanceGroupManager=last(url)).execute()
            total += igm["targetSize"]
        return total

    def estate():
        compute_wait(compute.networks().insert(project=a.project, body={"name": VPC, "autoCreateSubnetworks": False}).execute(), "global")
        compute_wait(compute.subnetworks().insert(project=a.project, region=REGION, body={
            "name": SUBNET, "network": f"projects/{a.project}/global/networks/{VPC}", "ipCidrRange": "10.50.0.0/20"}).execute(), "region")
        gke_wait(clusters.create(parent=location, body={"cluster": {
            "name": CLUSTER, "initialClusterVersion": "1.33", "locations": [ZONE],
            "network": VPC, "subnetwork": SUBNET,
            "networkConfig": {"enableMultiNetworking": True, "datapathProvider": "ADVANCED_DATAPATH"},
            "nodePools": [{"name": "default-pool", "initialNodeCount": 3, "config": {"machineType": "e2-standard-8"}}],
        }}).execute())
        cluster = clusters.get(name=cluster_id).execute()
        expect(cluster.get("status") == "RUNNING", f"cluster status {cluster.get('status')}")
        summary.update(cluster=cluster_id, vpc=f"projects/{a.project}/global/networks/{VPC}",
                       subnet=f"projects/{a.project}/regions/{REGION}/subnetworks/{SUBNET}",
                       version=cluster.get("currentMasterVersion"))

    def check():
        pool = pools.get(name=f"{cluster_id}/nodePools/{a.pool}").execute()
        config = pool.get("config", {})
        owner = config.get("resourceLabels", {}).get("hpc_owner")
        expect(owner == a.owner, f"resource labels {config.get('resourceLabels')}, expected hpc_owner={a.owner}")
        expect(config.get("machineType") == "a3-megagpu-8g", f"machine type {config.get('machineType')}")
        accel = (config.get("accelerators") or [{}])[0]
        expect(accel.get("acceleratorType") == "nvidia-h100-mega-80gb" and str(accel.get("acceleratorCount")) == "8",
               f"accelerators {config.get('accelerators')}")
        expect(pool.get("locations") == [ZONE], f"locations {pool.get('locations')}")
        placement = pool.get("placementPolicy", {})
        expect(placement.get("type") == "COMPACT" and placement.get("policyName") == f"{a.fabric}-placement",
               f"placement {placement}")
        extra = pool.get("networkConfig", {}).get("additionalNodeNetworkConfigs", [])
        expect(len(extra) == a.networks, f"{len(extra)} additional node networks, expected {a.networks}: {extra}")
        expect(all(last(n.get("network")).startswith(f"{a.fabric}-gpu-") for n in extra), f"additional networks {extra}")
        expect(not pool.get("management", {}).get("autoUpgrade"), f"management {pool.get('management')}")
        expect(pool.get("status") == "RUNNING", f"status {pool.get('status')}")
        size = size_of(pool)
        expect(size == a.count, f"size {size} (instance groups), expected {a.count}")
        names = [p["name"] for p in pools.list(parent=cluster_id).execute().get("nodePools", [])]
        expect(sorted(names) == sorted(["default-pool", a.pool]), f"node pools {names}")
        summary["pool"] = {"size": size, "labels": config.get("labels"), "taints": config.get("taints"),
                           "placement": placement.get("policyName"), "networks": len(extra), "version": pool.get("version")}

    def own_pool():
        gke_wait(pools.create(parent=cluster_id, body={"nodePool": {
            "name": "other", "initialNodeCount": 1, "config": {"machineType": "e2-standard-8"}}}).execute())
        name = f"{cluster_id}/nodePools/other"
        gke_wait(pools.setSize(name=name, body={"nodeCount": 2}).execute())
        expect(size_of(pools.get(name=name).execute()) == 2, "own pool not resized to 2")
        gke_wait(pools.delete(name=name).execute())
        names = [p["name"] for p in pools.list(parent=cluster_id).execute().get("nodePools", [])]
        expect("other" not in names, f"own pool still listed after its delete: {names}")
        summary["own"] = {"node_pool": "other", "resized_to": 2, "deleted": True}

    def scale():
        name = f"{cluster_id}/nodePools/{a.pool}"
        gke_wait(pools.setSize(name=name, body={"nodeCount": a.count}).execute())
        pool = pools.get(name=name).execute()
        config = pool["config"]
        labels = dict(config.get("labels", {}))
        if a.label_team:
            labels["example.com/team"] = a.label_team
        taints = config.get("taints", [])
        if a.taint_effect:
            taints = [dict(t, effect=a.taint_effect) for t in taints]
        gke_wait(pools.update(name=name, body={"nodeVersion": pool["version"], "imageType": config["imageType"],
                                               "labels": {"labels": labels}, "taints": {"taints": taints},
                                               "etag": pool["etag"]}).execute())
        summary["scaled"] = a.count

    def remove():
        gke_wait(clusters.delete(name=cluster_id).execute())
        compute_wait(compute.subnetworks().delete(project=a.project, region=REGION, subnetwork=SUBNET).execute(), "region")
        compute_wait(compute.networks().delete(project=a.project, network=VPC).execute(), "global")
        summary["removed"] = True

    if a.mode == "estate":
        step("estate (networks.insert, subnetworks.insert, clusters.create)", estate)
    elif a.mode == "check":
        step("the pool (nodePools.get, nodePools.list, instanceGroupManagers.get)", check)
        step("own node pool (nodePools.create, setSize, delete)", own_pool)
    elif a.mode == "scale":
        step("scale (nodePools.setSize, nodePools.update under its etag)", scale)
    else:
        step("remove (clusters.delete, subnetworks.delete, networks.delete)", remove)
    report.finish()


if __name__ == "__main__":
    main()
