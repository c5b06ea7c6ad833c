"""Oracle's own `oci` SDK reads back what the provider made on the OCI emulator (VCN, subnet, NSG and its rules,
compute cluster or cluster network, instances and their VNICs, instance configuration, File Storage with
Lustre), creates and deletes a VCN of its own (waiting with oci.wait_until), and checks the emulator's
signature verification with the SDK's own signer: a signed request is accepted, the same request with its
body changed after signing is refused with 401.

    python oci.py --endpoint http://127.0.0.1:PORT --tenancy T --user U --fingerprint F --key-file PEM \
        --region us-ashburn-1 --compartment C --fabric accfab --cluster acc --filesystem accfs \
        --owner-fabric M1 --owner-cluster M2 --owner-filesystem M3

Every check runs even when an earlier one fails; prints one JSON summary on stdout (its `problems` list each
mismatch and SDK exception), and exits 1 listing on stderr each mismatch and each SDK exception (a refusal, an answer the SDK cannot parse).
"""

import argparse
import ipaddress
import json
import os
import sys

# This file is oci.py: its directory must not shadow the SDK's `oci` package.
from vendor_report import Mismatch, Report, expect  # noqa: E402,F401 - before this directory leaves the path

sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import oci  # noqa: E402
import requests  # noqa: E402



def main():
    p = argparse.ArgumentParser()
    for flag in ("endpoint", "tenancy", "user", "fingerprint", "key-file", "region", "compartment", "fabric",
                 "cluster", "filesystem", "owner-fabric", "owner-cluster", "owner-filesystem"):
        p.add_argument(f"--{flag}", required=True)
    a = p.parse_args()
    if os.environ.get("HPC_VENDOR_DEBUG"):
        import logging

        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)

    config = {"user": a.user, "tenancy": a.tenancy, "fingerprint": a.fingerprint, "key_file": a.key_file, "region": a.region}
    oci.config.validate_config(config)
    kw = {"service_endpoint": a.endpoint, "retry_strategy": oci.retry.NoneRetryStrategy()}
    vn = oci.core.VirtualNetworkClient(config, **kw)
    compute = oci.core.ComputeClient(config, **kw)
    management = oci.core.ComputeManagementClient(config, **kw)
    lustre = oci.lustre_file_storage.LustreFileStorageClient(config, **kw)
    cid, owner = a.compartment, "hpc:owner"
    report = Report('The OCI SDK')
    summary = report.summary

    step = report.step

    def owned(thing, marker, what):
        tags = thing.freeform_tags or {}
        expect(tags.get(owner) == marker, f"{what} {thing.id}: freeform tags {tags}, expected {owner}={marker}")

    # The fabric: its VCN, subnet and network security group with its rules.
    def fabric():
        vcns = oci.pagination.list_call_get_all_results(vn.list_vcns, cid, display_name=f"{a.fabric}-vpc").data
        expect(len(vcns) == 1, f"list_vcns(display_name={a.fabric}-vpc): {[v.id for v in vcns]}")
        vcn = vn.get_vcn(vcns[0].id).data
        owned(vcn, a.owner_fabric, "VCN")
        expect(vcn.lifecycle_state == "AVAILABLE", f"VCN {vcn.lifecycle_state}")
        subnets = vn.list_subnets(cid, vcn_id=vcn.id).data
        expect(len(subnets) == 1, f"list_subnets: {[s.display_name for s in subnets]}")
        subnet = vn.get_subnet(subnets[0].id).data
        owned(subnet, a.owner_fabric, "subnet")
        nsgs = vn.list_network_security_groups(compartment_id=cid, vcn_id=vcn.id).data
        expect(len(nsgs) == 1, f"list_network_security_groups: {[n.display_name for n in nsgs]}")
        nsg = vn.get_network_security_group(nsgs[0].id).data
        owned(nsg, a.owner_fabric, "NSG")
        rules = vn.list_network_security_group_security_rules(nsg.id).data
        expect(rules, f"NSG {nsg.id} has no security rules")
        summary["fabric"] = {
            "vcn": vcn.id, "vcn_name": vcn.display_name, "cidr_blocks": vcn.cidr_blocks, "owner": vcn.freeform_tags.get(owner),
            "subnet": subnet.id, "subnet_cidr": subnet.cidr_block, "nsg": nsg.id,
            "nsg_rules": sorted(f"{r.direction} {r.protocol} {r.source_type or r.destination_type}" for r in rules),
        }
        return vcn, subnet, nsg

    got = step("fabric (list_vcns, get_vcn, list_subnets, get_subnet, list/get_network_security_group(s), "
               "list_network_security_group_security_rules)", fabric)
    vcn, subnet, nsg = got if got else (None, None, None)

    # The cluster's placement: a compute cluster, or a cluster network.
    def placement():
        clusters = compute.list_compute_clusters(cid, availability_domain=None).data.items
        mine = [c for c in clusters if c.display_name == f"{a.fabric}-cc"]
        if mine:
            cc = compute.get_compute_cluster(mine[0].id).data
            owned(cc, a.owner_fabric, "compute cluster")
            members = oci.pagination.list_call_get_all_results(compute.list_instances, cid, compute_cluster_id=cc.id).data
            summary["placement"] = {"compute_cluster": cc.id, "state": cc.lifecycle_state,
                                    "members": sorted(i.display_name for i in members if i.lifecycle_state != "TERMINATED")}
            return
        networks = management.list_cluster_networks(cid).data
        mine = [n for n in networks if n.display_name.startswith(a.cluster)]
        expect(mine, f"neither a compute cluster {a.fabric}-cc nor a cluster network {a.cluster}*: "
                     f"{[c.display_name for c in clusters]} {[n.display_name for n in networks]}")
        cn = management.get_cluster_network(mine[0].id).data
        owned(cn, a.owner_cluster, "cluster network")
        summary["placement"] = {"cluster_network": cn.id, "state": cn.lifecycle_state}

    step("placement (list_compute_clusters, get_compute_cluster, list_instances(compute_cluster_id) / list_cluster_networks)", placement)

    # The nodes: instances, each with its primary VNIC's private IP inside the subnet.
    summary["nodes"] = []

    def nodes():
        listed = oci.pagination.list_call_get_all_results(compute.list_instances, cid).data
        mine = [i for i in listed if (i.freeform_tags or {}).get("hpc:cluster") == a.cluster and i.lifecycle_state != "TERMINATED"]
        expect(mine, f"no instance tagged hpc:cluster={a.cluster}: {[i.display_name for i in listed]}")
        for i in sorted(mine, key=lambda i: i.display_name):
            inst = compute.get_instance(i.id).data
            owned(inst, a.owner_cluster, "instance")
            attachments = compute.list_vnic_attachments(cid, instance_id=inst.id).data
            expect(len(attachments) >= 1, f"{inst.display_name}: no VNIC attachment")
            vnic_id = attachments[0].vnic_id
            ips = vn.list_private_ips(vnic_id=vnic_id).data
            expect(len(ips) >= 1, f"{inst.display_name}: VNIC {vnic_id} has no private IP")
            ip = ips[0].ip_address
            if subnet is not None:
                expect(attachments[0].subnet_id == subnet.id, f"{inst.display_name}: VNIC in {attachments[0].subnet_id}, not {subnet.id}")
                expect(ipaddress.ip_address(ip) in ipaddress.ip_network(subnet.cidr_block),
                       f"{inst.display_name}: {ip} is outside its subnet {subnet.cidr_block}")
            summary["availability_domain"] = inst.availability_domain
            summary["nodes"].append({
                "name": inst.display_name, "id": inst.id, "shape": inst.shape, "state": inst.lifecycle_state,
                "private_ip": ip, "vnic": vnic_id,
            })
        return [n["vnic"] for n in summary["nodes"]]

    vnics = step("nodes (list_instances, get_instance, list_vnic_attachments, list_private_ips)", nodes) or []

    def vnic():
        for v in vnics:
            got = vn.get_vnic(v).data
            node = next(n for n in summary["nodes"] if n["vnic"] == v)
            expect(got.private_ip == node["private_ip"], f"get_vnic({v}).private_ip {got.private_ip} != {node['private_ip']}")

    step("get_vnic", vnic)

    def instance_configuration():
        configs = management.list_instance_configurations(cid).data
        mine = [c for c in configs if (c.freeform_tags or {}).get("hpc:cluster") == a.cluster]
        if not mine:
            summary["instance_configuration"] = None
            return
        ic = management.get_instance_configuration(mine[0].id).data
        owned(ic, a.owner_cluster, "instance configuration")
        launch = ic.instance_details.launch_details
        summary["instance_configuration"] = {"id": ic.id, "type": ic.instance_details.instance_type, "shape": launch.shape}

    step("list/get_instance_configuration(s)", instance_configuration)

    # The filesystem.
    def filesystem():
        listed = lustre.list_lustre_file_systems(compartment_id=cid, display_name=a.filesystem).data.items
        expect(len(listed) == 1, f"list_lustre_file_systems(display_name={a.filesystem}): {[f.id for f in listed]}")
        fs = lustre.get_lustre_file_system(listed[0].id).data
        owned(fs, a.owner_filesystem, "Lustre file system")
        if subnet is not None:
            expect(fs.subnet_id == subnet.id, f"filesystem in {fs.subnet_id}, not {subnet.id}")
        summary["filesystem"] = {
            "id": fs.id, "state": fs.lifecycle_state, "capacity_gbs": fs.capacity_in_gbs, "name": fs.file_system_name,
            "mgs_address": fs.management_service_address, "lnet": fs.lnet, "performance_tier": fs.performance_tier,
        }

    step("filesystem (list_lustre_file_systems, get_lustre_file_system)", filesystem)

    # A VCN of our own, made and deleted, waited on with oci.wait_until.
    summary["own"] = {}

    def own_vcn():
        details = oci.core.models.CreateVcnDetails(compartment_id=cid, cidr_blocks=["10.78.0.0/16"], display_name="vendor-vcn",
                                                   freeform_tags={"made-by": "oci-sdk"})
        made = vn.create_vcn(details).data
        summary["own"]["vcn"] = made.id
        ready = oci.wait_until(vn, vn.get_vcn(made.id), "lifecycle_state", "AVAILABLE", max_wait_seconds=60, max_interval_seconds=1).data
        expect(ready.cidr_blocks == ["10.78.0.0/16"], f"own VCN cidr_blocks {ready.cidr_blocks}")
        summary["own"]["available"] = True
        vn.delete_vcn(made.id)
        # OCI answers a deleted VCN's GET with TERMINATING, then TERMINATED, before it forgets it (404).
        try:
            first = vn.get_vcn(made.id)
        except oci.exceptions.ServiceError as e:
            expect(e.status == 404, f"get_vcn after delete: {e.status} {e.code}")
            summary["own"]["after_delete"] = "404 at once"
        else:
            summary["own"]["after_delete"] = first.data.lifecycle_state
            oci.wait_until(vn, first, "lifecycle_state", "TERMINATED", max_wait_seconds=60, max_interval_seconds=1,
                           succeed_on_not_found=True)
        summary["own"]["terminated"] = True

    step("own VCN (create_vcn, wait_until AVAILABLE, delete_vcn, wait_until TERMINATED)", own_vcn)

    # An instance configuration of our own: the SDK's polymorphic body (source NONE, instanceType compute).
    def own_instance_configuration():
        M = oci.core.models
        launch = M.InstanceConfigurationLaunchInstanceDetails(compartment_id=cid, shape="BM.GPU.H100.8",
                                                              availability_domain=summary.get("availability_domain"))
        details = M.CreateInstanceConfigurationDetails(compartment_id=cid, display_name="vendor-ic", freeform_tags={"made-by": "oci-sdk"},
                                                       instance_details=M.ComputeInstanceDetails(launch_details=launch))
        made = management.create_instance_configuration(details).data
        expect(made.instance_details.instance_type == "compute" and made.instance_details.launch_details.shape == "BM.GPU.H100.8",
               f"own instance configuration read back as {made}")
        management.delete_instance_configuration(made.id)
        summary["own"]["instance_configuration"] = made.id
        summary["own"]["instance_configuration_deleted"] = True

    step("own instance configuration (create_instance_configuration, delete_instance_configuration)", own_instance_configuration)

    # The Compute GPU limit the nodes count against, through the SDK's LimitsClient (its own host and version
    # path, /20190729): the nodes' GPUs are in use there.
    def resource_availability():
        shape = summary["nodes"][0]["shape"] if summary.get("nodes") else None
        expect(shape == "BM.GPU.H100.8", f"the nodes' shape: {shape}")
        limits = oci.limits.LimitsClient(config, **kw)
        got = limits.get_resource_availability("compute", "gpu-h100-count", a.tenancy,
                                               availability_domain=summary.get("availability_domain")).data
        want = 8 * len(summary["nodes"])
        expect(got.used == want, f"get_resource_availability(gpu-h100-count).used {got.used}, expected {want}")
        summary["resource_availability"] = {"used": got.used, "available": got.available}

    step("resource availability (LimitsClient.get_resource_availability)", resource_availability)

    # The SDK's own signer: a signed request passes; the same request with its body changed after signing
    # (the x-content-sha256 and the signature are of the original) is refused; so is one with its path changed.
    def signatures():
        signer = oci.signer.Signer(a.tenancy, a.user, a.fingerprint, a.key_file)
        base = a.endpoint.rstrip("/") + "/20160918"
        ok = requests.get(f"{base}/vcns", params={"compartmentId": cid}, auth=signer, timeout=10)
        expect(ok.status_code == 200, f"signed GET /vcns: {ok.status_code} {ok.text[:300]}")
        body = json.dumps({"compartmentId": cid, "cidrBlocks": ["10.79.0.0/16"], "displayName": "signed-vcn"})
        session = requests.Session()
        req = requests.Request("POST", f"{base}/vcns", data=body, headers={"content-type": "application/json"}, auth=signer)
        prepared = session.prepare_request(req)
        expect("x-content-sha256" in {k.lower() for k in prepared.headers}, f"the signer did not sign the body: {dict(prepared.headers)}")
        tampered = body.replace("signed-vcn", "forged-vcn")
        assert len(tampered) == len(body)
        prepared.body = tampered
        refused = session.send(prepared, timeout=10)
        expect(refused.status_code == 401, f"POST /vcns with its body changed after signing: {refused.status_code} {refused.text[:300]}")
        code = refused.json().get("code") if refused.headers.get("content-type", "").startswith("application/json") else None
        expect(code == "NotAuthenticated", f"tampered body refused with code {code!r}: {refused.text[:300]}")
        moved = session.prepare_request(requests.Request("GET", f"{base}/vcns", params={"compartmentId": cid}, auth=signer))
        moved.url = moved.url.replace("compartmentId=", "compartmentId=x")
        other = session.send(moved, timeout=10)
        expect(other.status_code == 401, f"GET /vcns with its query changed after signing: {other.status_code} {other.text[:300]}")
        unsigned = requests.get(f"{base}/vcns", params={"compartmentId": cid}, timeout=10)
        expect(unsigned.status_code == 401, f"unsigned GET /vcns: {unsigned.status_code}")
        left = [v.display_name for v in vn.list_vcns(cid).data]
        expect("forged-vcn" not in left and "signed-vcn" not in left, f"the tampered create made a VCN: {left}")
        summary["signatures"] = {"signed": ok.status_code, "tampered_body": refused.status_code, "tampered_query": other.status_code,
                                 "unsigned": unsigned.status_code}

    step("signatures (oci.signer.Signer with requests)", signatures)

    report.finish()


if __name__ == "__main__":
    main()
