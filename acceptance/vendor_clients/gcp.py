"""Google's own clients read back what the provider made on the Google Cloud emulator: google-api-python-client
(Compute v1 from its bundled discovery document) lists the cluster's instances by label, gets the
placement resource policy and the fabric's networks, inserts and deletes a firewall of its own (waiting on
the global operation with the client's own request); google-cloud-lustre's REST transport reads the
Managed Lustre instance.

    python gcp.py --endpoint http://127.0.0.1:PORT --project ml-prod --region us-central1 --zone us-central1-a \
        --fabric accfab --cluster acc --filesystem accfs --gpu-networks 8 \
        --owner-fabric M1 --owner-cluster M2 --owner-filesystem M3

Every check runs even when an earlier one fails; prints one JSON summary on stdout (its `problems` list each
mismatch and SDK exception), and exits 1 listing on stderr each mismatch and each SDK exception (a refusal, an answer the SDK cannot parse).
"""

import argparse
import os
import sys
import time

# This directory must not shadow the SDKs' packages.
from vendor_report import Mismatch, Report, expect  # noqa: E402,F401 - before this directory leaves the path

sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import google.auth.credentials  # noqa: E402
from googleapiclient import discovery  # noqa: E402



def last(url):
    return (url or "").rstrip("/").rsplit("/", 1)[-1]


COMPUTE = "https://www.googleapis.com/compute/v1/"


def not_full_urls(resource, fields):
    """Compute answers every reference to another resource as its full URL, whatever form the request used:
    the fields that are not."""
    bad = []
    for field in fields:
        value = resource
        for key in field.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        for v in value if isinstance(value, list) else [value]:
            if v is not None and not str(v).startswith(COMPUTE):
                bad.append(f"{field}={v!r}")
    return bad


def full_urls(resource, fields, what):
    bad = not_full_urls(resource, fields)
    expect(not bad, f"{what}: references not given as full URLs ({COMPUTE}...), as Compute answers them: {', '.join(bad)}")


def description_fields(text):
    """`hpc-provider fabric=x ... owner=y` into a dict."""
    return dict(w.split("=", 1) for w in (text or "").split() if "=" in w)


def main():
    p = argparse.ArgumentParser()
    for flag in ("endpoint", "project", "region", "zone", "fabric", "cluster", "filesystem", "owner-fabric", "owner-cluster", "owner-filesystem"):
        p.add_argument(f"--{flag}", required=True)
    p.add_argument("--gpu-networks", type=int, default=0)
    a = p.parse_args()
    creds = google.auth.credentials.AnonymousCredentials()
    ep = a.endpoint.rstrip("/")
    compute = discovery.build("compute", "v1", static_discovery=True, credentials=creds,
                              client_options={"api_endpoint": f"{ep}/compute/v1/"})
    project, zone, region = a.project, a.zone, a.region
    report = Report("Google's clients")
    summary = report.summary

    step = report.step

    # The fabric: host VPC (+ GPU VPCs), each with the fabric's owner in its description.
    def networks():
        host = compute.networks().get(project=project, network=f"{a.fabric}-vpc").execute()
        fields = description_fields(host.get("description"))
        expect(fields.get("owner") == a.owner_fabric, f"network {host['name']}: description {host.get('description')!r}")
        listed = []
        request = compute.networks().list(project=project, maxResults=5)
        while request is not None:
            page = request.execute()
            listed += [n["name"] for n in page.get("items", [])]
            request = compute.networks().list_next(request, page)
        gpu = sorted(n for n in listed if n.startswith(f"{a.fabric}-gpu-"))
        expect(len(gpu) == a.gpu_networks, f"{a.gpu_networks} GPU VPCs expected, listed {listed}")
        for name in gpu:
            net = compute.networks().get(project=project, network=name).execute()
            expect(description_fields(net.get("description")).get("owner") == a.owner_fabric, f"network {name}: {net.get('description')!r}")
        subnets = compute.subnetworks().list(project=project, region=region, filter=f'network = "{host["selfLink"]}"').execute().get("items", [])
        all_subnets = compute.subnetworks().list(project=project, region=region).execute().get("items", [])
        summary["fabric"] = {"subnets_listed": len(all_subnets)}
        step("subnetworks.list filtered by network URL", lambda: expect(
            subnets, f"subnetworks.list(filter=network = \"{host['selfLink']}\") found none of "
                     f"{[(sn['name'], sn.get('network')) for sn in all_subnets]}"))
        step("subnetworks' references", lambda: expect(
            not [sn for sn in all_subnets if not_full_urls(sn, ["network", "region", "selfLink"])],
            "subnetworks with references not given as full URLs, as Compute answers them: "
            + "; ".join(f"{sn['name']}: {', '.join(not_full_urls(sn, ['network', 'region', 'selfLink']))}"
                        for sn in all_subnets if not_full_urls(sn, ["network", "region", "selfLink"]))))
        summary["fabric"] |= {
            "host_network": host["selfLink"], "mtu": host.get("mtu"), "auto_create_subnetworks": host.get("autoCreateSubnetworks"),
            "gpu_networks": gpu, "networks_listed": len(listed), "owner": fields.get("owner"),
            "host_subnets": sorted((s["name"], s["ipCidrRange"]) for s in subnets),
        }
        return {s["selfLink"]: s["ipCidrRange"] for s in subnets}

    host_subnets = step("networks (networks.get, networks.list paged, subnetworks.list)", networks) or {}

    def policy():
        rp = compute.resourcePolicies().get(project=project, region=region, resourcePolicy=f"{a.fabric}-placement").execute()
        expect(rp.get("groupPlacementPolicy", {}).get("collocation") == "COLLOCATED", f"resource policy {rp}")
        expect(description_fields(rp.get("description")).get("owner") == a.owner_fabric, f"resource policy description {rp.get('description')!r}")
        summary["resource_policy"] = {"name": rp["name"], "self_link": rp["selfLink"], "placement": rp["groupPlacementPolicy"]}

    step("resourcePolicies.get", policy)

    summary["nodes"] = []

    def fidelity(i):
        problems = not_full_urls(i, ["zone", "machineType", "resourcePolicies", "selfLink"])
        for k, nic in enumerate(i["networkInterfaces"]):
            problems += [f"networkInterfaces[{k}].{p}" for p in not_full_urls(nic, ["network", "subnetwork"])]
            if nic.get("name") != f"nic{k}":
                problems.append(f"networkInterfaces[{k}].name={nic.get('name')!r} (Compute names them nic0, nic1, ...)")
        for k, d in enumerate(i.get("disks", [])):
            if not str(d.get("source", "")).startswith(COMPUTE) or "initializeParams" in d:
                problems.append(f"disks[{k}]={d} (Compute answers an attached disk with its source URL, deviceName, type, "
                                "mode; initializeParams is input-only)")
        expect(not problems, f"instance {i['name']}: " + "; ".join(problems))

    def instances():
        got = compute.instances().list(project=project, zone=zone, filter=f'labels.hpc_cluster = "{a.cluster}"').execute()
        items = sorted(got.get("items", []), key=lambda i: i["name"])
        expect(items, f"no instance with labels.hpc_cluster = {a.cluster}: {got}")
        for i in items:
            expect(i.get("labels", {}).get("hpc_owner") == a.owner_cluster, f"instance {i['name']}: labels {i.get('labels')}")
            one = compute.instances().get(project=project, zone=zone, instance=i["name"]).execute()
            expect(one["id"] == i["id"], f"instances.get {i['name']}: id {one['id']} != {i['id']}")
            nic0 = i["networkInterfaces"][0]
            step(f"instance {i['name']} as Compute shows it", lambda i=i: fidelity(i))
            summary["nodes"].append({
                "name": i["name"], "status": i["status"], "machine_type": last(i["machineType"]),
                "private_ip": nic0.get("networkIP"), "network": last(nic0.get("network")), "subnetwork": last(nic0.get("subnetwork")),
                "nics": len(i["networkInterfaces"]), "resource_policies": [last(r) for r in i.get("resourcePolicies", [])],
                "labels": i.get("labels", {}),
            })
        other = compute.instances().list(project=project, zone=zone, filter='labels.hpc_cluster = "no-such-cluster"').execute()
        expect(not other.get("items"), f"a filter that matches nothing listed {[i['name'] for i in other.get('items', [])]}")

    step("instances (instances.list by label filter, instances.get)", instances)

    # A firewall of our own, inserted and deleted, each waited on with globalOperations.wait / get.
    def wait(op):
        deadline = time.time() + 60
        while op.get("status") != "DONE":
            expect(time.time() < deadline, f"operation {op.get('name')} not DONE after 60 s: {op}")
            op = compute.globalOperations().wait(project=project, operation=op["name"]).execute()
        expect(not op.get("error"), f"operation {op['name']} failed: {op.get('error')}")
        return compute.globalOperations().get(project=project, operation=op["name"]).execute()

    def firewall():
        network = summary.get("fabric", {}).get("host_network") or f"projects/{project}/global/networks/{a.fabric}-vpc"
        body = {"name": "vendor-client-fw", "network": network, "direction": "INGRESS", "priority": 1000,
                "sourceRanges": ["10.0.0.0/8"], "allowed": [{"IPProtocol": "tcp", "ports": ["22"]}],
                "description": "made by google-api-python-client"}
        done = wait(compute.firewalls().insert(project=project, body=body).execute())
        expect(done.get("operationType") == "insert" and last(done.get("targetLink")) == "vendor-client-fw", f"insert operation {done}")
        fw = compute.firewalls().get(project=project, firewall="vendor-client-fw").execute()
        step("own firewall references", lambda: full_urls(fw, ["network", "selfLink"], "firewall vendor-client-fw"))
        expect(fw["allowed"] == body["allowed"] and fw["sourceRanges"] == body["sourceRanges"], f"firewall read back {fw}")
        wait(compute.firewalls().delete(project=project, firewall="vendor-client-fw").execute())
        try:
            compute.firewalls().get(project=project, firewall="vendor-client-fw").execute()
            raise Mismatch("vendor-client-fw still readable after its delete")
        except Mismatch:
            raise
        except Exception as e:
            expect(getattr(getattr(e, "resp", None), "status", None) == 404, f"firewall get after delete: {e}")
        summary["own"] = {"firewall": fw["selfLink"], "deleted": True}

    step("own firewall (firewalls.insert, globalOperations.wait/get, firewalls.get, firewalls.delete)", firewall)

    def filesystem():
        from google.cloud import lustre_v1

        client = lustre_v1.LustreClient(credentials=creds, transport="rest", client_options={"api_endpoint": ep})
        name = f"projects/{project}/locations/{zone}/instances/{a.filesystem}"
        inst = client.get_instance(name=name)
        expect(inst.labels.get("hpc_owner") == a.owner_filesystem, f"Lustre instance labels {dict(inst.labels)}")
        listed = [i.name for i in client.list_instances(parent=f"projects/{project}/locations/{zone}")]
        expect(name in listed, f"list_instances: {listed}")
        summary["filesystem"] = {
            "name": inst.name, "state": lustre_v1.Instance.State(inst.state).name, "capacity_gib": inst.capacity_gib,
            "filesystem": inst.filesystem, "network": inst.network, "mount_point": inst.mount_point,
            "per_unit_storage_throughput": inst.per_unit_storage_throughput,
        }

    step("Managed Lustre (google-cloud-lustre REST: get_instance, list_instances)", filesystem)

    report.finish()


if __name__ == "__main__":
    main()
