"""Azure's own SDKs for the AKS node pool case on the ARM emulator: azure-mgmt-resource, -network and
-containerservice, with their real LRO pollers.

    python azure_aks.py --endpoint https://127.0.0.1:PORT --ca PEM --subscription SUB --mode estate
        makes the other team's estate: resource group ml-rg, virtual network ml-vnet with subnets system and
        gpu, and AKS cluster ml-prod (1.33, Azure CNI) with its system pool; prints their ids
    python azure_aks.py ... --mode check --pool gpu --owner M --subnet ID --ppg ID --count N
        reads the agent pool back (size, VM size, subnet, proximity placement group, GPU driver, labels,
        taints, owner marker), then makes, scales and deletes an agent pool of its own
    python azure_aks.py ... --mode scale --pool gpu --count N [--taints JSON] [--labels JSON]
        sets the pool's count (and its taints and labels) as someone outside the configuration would (a
        read-modify-write PUT under the pool's eTag)
    python azure_aks.py ... --mode remove
        deletes the estate

Prints one JSON summary on stdout (its `problems` list each mismatch and SDK exception) and exits 1 when
there are any.
"""

import argparse
import json
import os
import sys
import time

from vendor_report import Mismatch, Report, expect  # noqa: E402,F401 - before this directory leaves the path

sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

from azure.core import MatchConditions  # noqa: E402
from azure.core.credentials import AccessToken  # noqa: E402
from azure.mgmt.containerservice import ContainerServiceClient  # noqa: E402
from azure.mgmt.containerservice.models import (  # noqa: E402
    AgentPool,
    ManagedCluster,
    ManagedClusterAgentPoolProfile,
    ManagedClusterAgentPoolProfileProperties,
    ManagedClusterProperties,
    ContainerServiceNetworkProfile,
)
from azure.mgmt.network import NetworkManagementClient  # noqa: E402
from azure.mgmt.network.models import AddressSpace, Subnet, VirtualNetwork  # noqa: E402
from azure.mgmt.resource.resources import ResourceManagementClient  # noqa: E402
from azure.mgmt.resource.resources.models import ResourceGroup  # noqa: E402

GROUP, VNET, CLUSTER = "ml-rg", "ml-vnet", "ml-prod"


class EmulatorCredential:
    def get_token(self, *scopes, **kwargs):
        return AccessToken("vendor-client-token", int(time.time()) + 3600)



def main():
    p = argparse.ArgumentParser()
    p.add_argument("--endpoint", required=True)
    p.add_argument("--ca", required=True)
    p.add_argument("--subscription", required=True)
    p.add_argument("--mode", required=True, choices=["estate", "check", "scale", "remove"])
    p.add_argument("--pool")
    p.add_argument("--owner")
    p.add_argument("--subnet")
    p.add_argument("--ppg")
    p.add_argument("--count", type=int)
    p.add_argument("--taints", help="JSON list of key=value:Effect")
    p.add_argument("--labels", help="JSON object")
    a = p.parse_args()
    kw = dict(base_url=a.endpoint, credential_scopes=["https://management.azure.com/.default"], connection_verify=a.ca,
              polling_interval=0.2)
    cred = EmulatorCredential()
    resources = ResourceManagementClient(cred, a.subscription, **kw)
    network = NetworkManagementClient(cred, a.subscription, **kw)
    aks = ContainerServiceClient(cred, a.subscription, **kw)
    report = Report('The Azure SDKs')
    summary = report.summary

    step = report.step

    def estate():
        resources.resource_groups.create_or_update(GROUP, ResourceGroup(location="eastus"))
        vnet = network.virtual_networks.begin_create_or_update(GROUP, VNET, VirtualNetwork(
            location="eastus", address_space=AddressSpace(address_prefixes=["10.40.0.0/16"]),
            subnets=[Subnet(name="system", address_prefix="10.40.0.0/20"), Subnet(name="gpu", address_prefix="10.40.16.0/20")])).result()
        system = next(s.id for s in vnet.subnets if s.name == "system")
        gpu = next(s.id for s in vnet.subnets if s.name == "gpu")
        cluster = aks.managed_clusters.begin_create_or_update(GROUP, CLUSTER, ManagedCluster(
            location="eastus",
            properties=ManagedClusterProperties(
                kubernetes_version="1.33", dns_prefix="ml-prod",
                agent_pool_profiles=[ManagedClusterAgentPoolProfile(name="system", count=3, vm_size="Standard_D8s_v5", mode="System",
                                                                    os_type="Linux", vnet_subnet_id=system)],
                network_profile=ContainerServiceNetworkProfile(network_plugin="azure"),
            ))).result()
        summary.update(cluster=cluster.id, vnet=vnet.id, subnet=gpu)

    def check():
        pool = aks.agent_pools.get(GROUP, CLUSTER, a.pool)
        props = pool.properties
        tags = props.tags or {}
        expect(tags.get("hpc:owner") == a.owner, f"agent pool tags {tags}, expected hpc:owner={a.owner}")
        expect(props.count == a.count, f"count {props.count}, expected {a.count}")
        expect(props.vm_size == "Standard_ND96isr_H100_v5", f"vm size {props.vm_size}")
        expect((props.vnet_subnet_id or "").lower() == a.subnet.lower(), f"subnet {props.vnet_subnet_id}, expected {a.subnet}")
        expect((props.proximity_placement_group_id or "").lower() == a.ppg.lower(),
               f"proximity placement group {props.proximity_placement_group_id}, expected {a.ppg}")
        expect(props.gpu_profile is not None and props.gpu_profile.driver == "None", f"gpu profile {props.gpu_profile}")
        expect(props.mode == "User", f"mode {props.mode}")
        expect(props.e_tag, "no eTag on the agent pool")
        names = [p.name for p in aks.agent_pools.list(GROUP, CLUSTER)]
        expect(sorted(names) == sorted(["system", a.pool]), f"agent pools {names}")
        summary["pool"] = {"count": props.count, "labels": props.node_labels, "taints": props.node_taints,
                           "upgrade": props.upgrade_settings.as_dict() if props.upgrade_settings else None}

    def own_pool():
        system = aks.agent_pools.get(GROUP, CLUSTER, "system").properties.vnet_subnet_id
        made = aks.agent_pools.begin_create_or_update(GROUP, CLUSTER, "other", AgentPool(properties=ManagedClusterAgentPoolProfileProperties(
            count=1, vm_size="Standard_D8s_v5", mode="User", os_type="Linux", vnet_subnet_id=system))).result()
        expect(made.properties.count == 1, f"own pool {made.as_dict()}")
        found = aks.agent_pools.get(GROUP, CLUSTER, "other")
        found.properties.count = 2
        scaled = aks.agent_pools.begin_create_or_update(GROUP, CLUSTER, "other", found, etag=found.properties.e_tag,
                                                        match_condition=MatchConditions.IfNotModified).result()
        expect(scaled.properties.count == 2, f"scaled own pool {scaled.as_dict()}")
        aks.agent_pools.begin_delete(GROUP, CLUSTER, "other").result()
        expect("other" not in [p.name for p in aks.agent_pools.list(GROUP, CLUSTER)], "own pool still listed after its delete")
        summary["own"] = {"agent_pool": "other", "scaled_to": 2, "deleted": True}

    def scale():
        found = aks.agent_pools.get(GROUP, CLUSTER, a.pool)
        found.properties.count = a.count
        if a.taints is not None:
            found.properties.node_taints = json.loads(a.taints)
        if a.labels is not None:
            found.properties.node_labels = json.loads(a.labels)
        aks.agent_pools.begin_create_or_update(GROUP, CLUSTER, a.pool, found, etag=found.properties.e_tag,
                                               match_condition=MatchConditions.IfNotModified).result()
        summary["scaled"] = a.count

    def remove():
        aks.managed_clusters.begin_delete(GROUP, CLUSTER).result()
        resources.resource_groups.begin_delete(GROUP).result()
        summary["removed"] = True

    if a.mode == "estate":
        step("estate (resource group, virtual network, AKS cluster)", estate)
    elif a.mode == "check":
        step("the pool (agent_pools.get, agent_pools.list)", check)
        step("own agent pool (begin_create_or_update, under its etag, begin_delete)", own_pool)
    elif a.mode == "scale":
        step("scale (agent_pools.get, begin_create_or_update under its etag)", scale)
    else:
        step("remove (managed_clusters.begin_delete, resource_groups.begin_delete)", remove)
    report.finish()


if __name__ == "__main__":
    main()
