"""Oracle's own `oci` SDK for the OKE self-managed worker case on the OCI emulator.

    python oci_oke.py --endpoint http://127.0.0.1:PORT --tenancy T --user U --fingerprint F --key-file PEM \
        --region us-ashburn-1 --compartment C --mode estate
        makes the other team's estate: VCN ml-vcn with subnets api (the cluster's endpoint) and gpu, and OKE
        cluster ml-prod (v1.33.1, private endpoint) waited for through its work request; prints their ids
    python oci_oke.py ... --mode check --pool gpu --owner M --count N --cluster ID
        reads the workers back: N running BM.GPU.H100.8 instances tagged with the pool and its owner, in the
        gpu subnet, whose instance configuration's user data joins them to the cluster with oke-install.sh,
        the cluster's private endpoint and its CA (the one CreateKubeconfig gives)
    python oci_oke.py ... --mode terminate --pool gpu
        terminates one of the workers, as someone outside the configuration would
    python oci_oke.py ... --mode remove
        deletes the estate

Prints one JSON summary on stdout (its `problems` list each mismatch and SDK exception) and exits 1 when
there are any.
"""

import argparse
import base64
import os
import sys
import time

from vendor_report import Mismatch, Report, expect  # noqa: E402,F401 - before this directory leaves the path

sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import oci  # noqa: E402

VCN, CLUSTER = "ml-vcn", "ml-prod"


def main():
    p = argparse.ArgumentParser()
    for flag in ("endpoint", "tenancy", "user", "fingerprint", "key-file", "region", "compartment", "mode"):
        p.add_argument(f"--{flag}", required=True)
    for flag in ("pool", "owner", "cluster"):
        p.add_argument(f"--{flag}")
    p.add_argument("--count", type=int)
    a = p.parse_args()
    config = {"user": a.user, "tenancy": a.tenancy, "fingerprint": a.fingerprint, "key_file": a.key_file, "region": a.region}
    oci.config.validate_config(config)
    kw = {"service_endpoint": a.endpoint, "retry_strategy": oci.retry.NoneRetryStrategy()}
    vn = oci.core.VirtualNetworkClient(config, **kw)
    compute = oci.core.ComputeClient(config, **kw)
    management = oci.core.ComputeManagementClient(config, **kw)
    ce = oci.container_engine.ContainerEngineClient(config, **kw)
    cid = a.compartment
    report = Report("The OCI SDK")
    summary = report.summary
    step = report.step
    wait = {"max_interval_seconds": 1, "max_wait_seconds": 120}

    def estate():
        vcn = vn.create_vcn(oci.core.models.CreateVcnDetails(compartment_id=cid, display_name=VCN, cidr_blocks=["10.60.0.0/16"])).data
        vcn = oci.wait_until(vn, vn.get_vcn(vcn.id), "lifecycle_state", "AVAILABLE", **wait).data
        subnets = {}
        for name, cidr in (("api", "10.60.0.0/28"), ("gpu", "10.60.16.0/20")):
            s = vn.create_subnet(oci.core.models.CreateSubnetDetails(compartment_id=cid, vcn_id=vcn.id, display_name=name,
                                                                       cidr_block=cidr, prohibit_public_ip_on_vnic=True)).data
            subnets[name] = oci.wait_until(vn, vn.get_subnet(s.id), "lifecycle_state", "AVAILABLE", **wait).data.id
        made = ce.create_cluster(oci.container_engine.models.CreateClusterDetails(
            name=CLUSTER, compartment_id=cid, vcn_id=vcn.id, kubernetes_version="v1.33.1",
            endpoint_config=oci.container_engine.models.CreateClusterEndpointConfigDetails(subnet_id=subnets["api"],
                                                                                          is_public_ip_enabled=False)))
        request = made.headers["opc-work-request-id"]
        done = oci.wait_until(ce, ce.get_work_request(request), "status", "SUCCEEDED", **wait).data
        cluster_id = next(r.identifier for r in done.resources if r.entity_type.lower() == "cluster")
        cluster = ce.get_cluster(cluster_id).data
        expect(cluster.lifecycle_state == "ACTIVE", f"cluster {cluster.lifecycle_state}")
        summary.update(cluster=cluster.id, vcn=vcn.id, subnet=subnets["gpu"], api_subnet=subnets["api"],
                       private_endpoint=cluster.endpoints.private_endpoint)

    def workers():
        found = [i for i in compute.list_instances(cid).data
                 if (i.freeform_tags or {}).get("hpc:node-pool") == a.pool and i.lifecycle_state not in ("TERMINATING", "TERMINATED")]
        return found

    def check():
        nodes = workers()
        expect(len(nodes) == a.count, f"{len(nodes)} workers, expected {a.count}")
        for i in nodes:
            tags = i.freeform_tags or {}
            expect(tags.get("hpc:owner") == a.owner, f"instance {i.display_name}: tags {tags}, expected hpc:owner={a.owner}")
            expect(i.shape == "BM.GPU.H100.8", f"instance {i.display_name}: shape {i.shape}")
        configs = [c for c in management.list_instance_configurations(cid).data if c.display_name == f"{a.pool}-ic"]
        expect(len(configs) == 1, f"instance configurations {[c.display_name for c in configs]}")
        config = management.get_instance_configuration(configs[0].id).data
        launch = config.instance_details.launch_details
        doc = base64.b64decode(launch.metadata["user_data"]).decode()
        cluster = ce.get_cluster(a.cluster).data
        endpoint = cluster.endpoints.private_endpoint.rsplit(":", 1)[0]
        kubeconfig = ce.create_kubeconfig(a.cluster, create_cluster_kubeconfig_content_details=(
            oci.container_engine.models.CreateClusterKubeconfigContentDetails(token_version="2.0.0", endpoint="PRIVATE_ENDPOINT"))
        ).data.content.decode()
        ca = next(line.split(":", 1)[1].strip().strip("\"'") for line in kubeconfig.splitlines() if "certificate-authority-data:" in line)
        expect("/etc/oke/oke-install.sh" in doc, "the user data does not run oke-install.sh")
        expect(f"--apiserver-endpoint '{endpoint}'" in doc, f"the join does not name the private endpoint {endpoint}")
        expect(f"--kubelet-ca-cert '{ca}'" in doc, "the join does not carry the cluster's CA")
        expect("--register-with-taints=nvidia.com/gpu=present:NoSchedule" in doc, "the join does not taint the nodes")
        summary["pool"] = {"workers": len(nodes), "image": launch.source_details.image_id,
                           "labels": "example.com/team=llm" in doc}

    def terminate():
        nodes = sorted(workers(), key=lambda i: i.display_name)
        victim = nodes[-1]
        compute.terminate_instance(victim.id)
        summary["terminated"] = victim.display_name

    def gone(read):
        """Waits until a deleted resource reads TERMINATED or is not found."""
        for _ in range(600):
            try:
                if read().data.lifecycle_state == "TERMINATED":
                    return
            except oci.exceptions.ServiceError as e:
                if e.status == 404:
                    return
                raise
            time.sleep(0.1)
        raise Mismatch("a deleted resource never went away")

    def remove():
        clusters = [c for c in ce.list_clusters(cid).data if c.name == CLUSTER and c.lifecycle_state != "DELETED"]
        for c in clusters:
            request = ce.delete_cluster(c.id).headers["opc-work-request-id"]
            oci.wait_until(ce, ce.get_work_request(request), "status", "SUCCEEDED", **wait)
        for v in [v for v in vn.list_vcns(cid).data if v.display_name == VCN]:
            for s in vn.list_subnets(cid, vcn_id=v.id).data:
                vn.delete_subnet(s.id)
                gone(lambda: vn.get_subnet(s.id))
            vn.delete_vcn(v.id)
            gone(lambda: vn.get_vcn(v.id))
        summary["removed"] = True

    if a.mode == "estate":
        step("estate (create_vcn, create_subnet, create_cluster, get_work_request, get_cluster)", estate)
    elif a.mode == "check":
        step("the workers (list_instances, get_instance_configuration, get_cluster, create_kubeconfig)", check)
    elif a.mode == "terminate":
        step("terminate a worker (terminate_instance)", terminate)
    else:
        step("remove (delete_cluster, delete_subnet, delete_vcn)", remove)
    report.finish()


if __name__ == "__main__":
    main()
