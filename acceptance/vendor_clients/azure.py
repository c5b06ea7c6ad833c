"""Azure's own management SDKs (azure-mgmt-compute, -network, -resource, -storagecache) read back what the
provider made on the ARM emulator, and make and delete pieces of their own with their real LRO pollers.

    python azure.py --endpoint https://127.0.0.1:PORT --ca PEM --subscription SUB --group accfab-rg \
        --fabric accfab --cluster acc --filesystem accfs --owner-fabric M1 --owner-cluster M2 --owner-filesystem M3

Every check runs even when an earlier one fails; prints one JSON summary on stdout (its `problems` list each
mismatch and SDK exception), and exits 1 listing on stderr each mismatch and each SDK exception (a refusal, an answer the SDK cannot parse).
"""

import argparse
import os
import sys
import time

# This file is azure.py: its directory must not shadow the SDK's `azure` package.
from vendor_report import Mismatch, Report, expect  # noqa: E402,F401 - before this directory leaves the path

sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

from azure.core.credentials import AccessToken
from azure.mgmt.compute import ComputeManagementClient
from azure.mgmt.network import NetworkManagementClient
from azure.mgmt.network.models import AddressSpace, VirtualNetwork
from azure.mgmt.resource.resources import ResourceManagementClient
from azure.mgmt.resource.resources.models import ResourceGroup
from azure.mgmt.storagecache import StorageCacheManagementClient


class EmulatorCredential:
    """A TokenCredential: a bearer token the emulator accepts (it checks there is one)."""

    def get_token(self, *scopes, **kwargs):
        return AccessToken("vendor-client-token", int(time.time()) + 3600)



def main():
    if os.environ.get("HPC_VENDOR_DEBUG"):
        import logging

        logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    p = argparse.ArgumentParser()
    p.add_argument("--endpoint", required=True)
    p.add_argument("--ca", required=True, help="PEM of the emulator's certificate")
    p.add_argument("--subscription", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--fabric", required=True)
    p.add_argument("--cluster", required=True)
    p.add_argument("--filesystem", required=True)
    p.add_argument("--owner-fabric", required=True)
    p.add_argument("--owner-cluster", required=True)
    p.add_argument("--owner-filesystem", required=True)
    a = p.parse_args()

    kw = dict(
        base_url=a.endpoint,
        credential_scopes=["https://management.azure.com/.default"],
        connection_verify=a.ca,
        polling_interval=0.2,
    )
    cred = EmulatorCredential()
    compute = ComputeManagementClient(cred, a.subscription, **kw)
    network = NetworkManagementClient(cred, a.subscription, **kw)
    resources = ResourceManagementClient(cred, a.subscription, **kw)
    cache = StorageCacheManagementClient(cred, a.subscription, **kw)
    rg, owner = a.group, "hpc:owner"
    report = Report('The Azure SDK')
    summary = report.summary

    step = report.step

    # The fabric: its group, virtual network, subnet and network security group.
    def fabric():
        group = resources.resource_groups.get(rg)
        expect(group.tags.get(owner) == a.owner_fabric, f"group {rg} tags {group.tags}")
        vnet = network.virtual_networks.get(rg, f"{a.fabric}-vpc")
        expect(vnet.tags.get(owner) == a.owner_fabric, f"vnet tags {vnet.tags}")
        subnet = network.subnets.get(rg, vnet.name, f"{a.fabric}-subnet")
        nsg = network.network_security_groups.get(rg, f"{a.fabric}-nsg")
        expect(nsg.tags.get(owner) == a.owner_fabric, f"nsg tags {nsg.tags}")
        expect(subnet.network_security_group is not None and subnet.network_security_group.id.lower() == nsg.id.lower(),
               f"subnet {subnet.id} is not behind {nsg.id}: {subnet.network_security_group}")
        summary["fabric"] = {
            "group": group.name, "location": group.location, "owner": group.tags.get(owner),
            "vnet": vnet.id, "address_space": list(vnet.address_space.address_prefixes),
            "subnet": subnet.id, "subnet_prefix": subnet.address_prefix, "nsg": nsg.id,
        }
        return subnet

    subnet = step("fabric (resource_groups.get, virtual_networks.get, subnets.get, network_security_groups.get)", fabric)
    subnet_id = (subnet.id if subnet else f"/subscriptions/{a.subscription}/resourceGroups/{rg}/providers/Microsoft.Network/virtualNetworks/{a.fabric}-vpc/subnets/{a.fabric}-subnet")

    def vnet_list():
        listed = [v.name for v in network.virtual_networks.list(rg)]
        expect(f"{a.fabric}-vpc" in listed, f"virtual_networks.list({rg}) = {listed}")

    step("virtual_networks.list", vnet_list)

    def scale_set_list():
        listed = [s.name for s in compute.virtual_machine_scale_sets.list(rg) if (s.tags or {}).get("hpc:cluster") == a.cluster]
        expect(listed, f"no scale set tagged hpc:cluster={a.cluster} in virtual_machine_scale_sets.list({rg})")
        return listed

    def scale_sets_by_group():
        # Resources - List By Resource Group, filtered to scale sets, as a fallback to name them.
        return [r.name for r in resources.resources.list_by_resource_group(rg)
                if r.type.lower() == "microsoft.compute/virtualmachinescalesets" and (r.tags or {}).get("hpc:cluster") == a.cluster]

    names = step("virtual_machine_scale_sets.list", scale_set_list) or step("resources.list_by_resource_group", scale_sets_by_group) or []
    summary["nodes"], summary["scale_sets"] = [], []

    def scale_set(name):
        got = compute.virtual_machine_scale_sets.get(rg, name)
        expect(got.tags.get(owner) == a.owner_cluster, f"scale set {name} tags {got.tags}")
        expect(got.tags.get("hpc:cluster") == a.cluster, f"scale set {name} tags {got.tags}")
        nic_config = got.virtual_machine_profile.network_profile.network_interface_configurations[0]
        joined = nic_config.ip_configurations[0].subnet.id
        expect(joined.lower() == subnet_id.lower(), f"{name} joins {joined}, not {subnet_id}")
        vms = list(compute.virtual_machine_scale_set_vms.list(rg, name))
        expect(len(vms) == got.sku.capacity, f"{name}: {len(vms)} VMs, capacity {got.sku.capacity}")
        nics = list(network.network_interfaces.list_virtual_machine_scale_set_network_interfaces(rg, name))
        ip_of_vm = {}
        for nic in nics:
            expect(nic.virtual_machine is not None, f"NIC {nic.id} names no VM")
            ip_of_vm[nic.virtual_machine.id.lower()] = nic.ip_configurations[0].private_ip_address
        for vm in sorted(vms, key=lambda v: int(v.instance_id)):
            ip = ip_of_vm.get(vm.id.lower())
            expect(ip, f"no NIC lists VM {vm.id}: {sorted(ip_of_vm)}")
            one = compute.virtual_machine_scale_set_vms.get(rg, name, vm.instance_id)
            expect(one.id == vm.id, f"VM get {vm.instance_id}: {one.id} != {vm.id}")
            summary["nodes"].append({"id": vm.id, "instance_id": vm.instance_id, "scale_set": name, "private_ip": ip,
                                     "provisioning_state": vm.provisioning_state})
        summary["scale_sets"].append({
            "name": name, "sku": got.sku.name, "capacity": got.sku.capacity, "owner": got.tags.get(owner),
            "proximity_placement_group": got.proximity_placement_group.id if got.proximity_placement_group else None,
            "vms": len(vms), "nics": len(nics),
        })

    for name in sorted(names):
        step(f"scale set {name} (virtual_machine_scale_sets.get, virtual_machine_scale_set_vms.list/get, "
             "network_interfaces.list_virtual_machine_scale_set_network_interfaces)", lambda: scale_set(name))

    def filesystem():
        fs = cache.aml_filesystems.get(rg, a.filesystem)
        expect(fs.tags.get(owner) == a.owner_filesystem, f"filesystem tags {fs.tags}")
        expect(fs.filesystem_subnet.lower() == subnet_id.lower(), f"filesystem subnet {fs.filesystem_subnet}")
        summary["filesystem"] = {
            "id": fs.id, "sku": fs.sku.name, "capacity_tib": fs.storage_capacity_ti_b, "owner": fs.tags.get(owner),
            "mgs_address": fs.client_info.mgs_address, "mount_command": fs.client_info.mount_command,
            "provisioning_state": fs.provisioning_state,
        }

    step("aml_filesystems.get", filesystem)

    def filesystem_list():
        found = [f.name for f in cache.aml_filesystems.list_by_resource_group(rg)]
        expect(a.filesystem in found, f"aml_filesystems.list_by_resource_group = {found}")

    step("aml_filesystems.list_by_resource_group", filesystem_list)

    # Our own: a resource group and a virtual network in it, made and deleted with the SDK's pollers.
    mine = "vendor-client-rg"
    summary["own"] = {}

    def own_group():
        made = resources.resource_groups.create_or_update(mine, ResourceGroup(location="eastus", tags={"made-by": "azure-sdk"}))
        expect(made.name == mine and made.properties.provisioning_state == "Succeeded", f"group create: {made}")
        summary["own"]["group"] = made.id

    def own_vnet():
        poller = network.virtual_networks.begin_create_or_update(
            mine, "vendor-vnet",
            VirtualNetwork(location="eastus", address_space=AddressSpace(address_prefixes=["10.77.0.0/16"]), tags={"made-by": "azure-sdk"}),
        )
        net = poller.result()
        expect(poller.status() == "Succeeded", f"vnet create poller ended {poller.status()}")
        expect(net.provisioning_state == "Succeeded" and net.address_space.address_prefixes == ["10.77.0.0/16"], f"vnet create: {net}")
        summary["own"]["vnet"] = net.id
        got = network.virtual_networks.get(mine, "vendor-vnet")
        expect(got.id == net.id, f"vnet get: {got.id}")

    def own_vnet_delete():
        poller = network.virtual_networks.begin_delete(mine, "vendor-vnet")
        poller.result()
        expect(poller.status() == "Succeeded", f"vnet delete poller ended {poller.status()}")
        try:
            network.virtual_networks.get(mine, "vendor-vnet")
            raise Mismatch("vendor-vnet still readable after its delete")
        except Mismatch:
            raise
        except Exception as e:
            expect(getattr(e, "status_code", None) == 404, f"vnet get after delete: {e}")
        summary["own"]["vnet_deleted"] = True

    def own_group_delete():
        poller = resources.resource_groups.begin_delete(mine)
        poller.result()
        expect(poller.status() == "Succeeded", f"group delete poller ended {poller.status()}")
        try:
            resources.resource_groups.get(mine)
            raise Mismatch(f"group {mine} still readable after its delete")
        except Mismatch:
            raise
        except Exception as e:
            expect(getattr(e, "status_code", None) == 404, f"group get after delete: {e}")
        summary["own"]["group_deleted"] = True

    def own_group_gone():
        expect(resources.resource_groups.check_existence(mine) is False, f"check_existence({mine}) is not False after its delete")

    step("resource_groups.create_or_update", own_group)
    step("virtual_networks.begin_create_or_update(...).result()", own_vnet)
    step("virtual_networks.begin_delete(...).result()", own_vnet_delete)
    step("resource_groups.begin_delete(...).result()", own_group_delete)
    step("resource_groups.check_existence (HEAD)", own_group_gone)

    report.finish()


if __name__ == "__main__":
    main()
