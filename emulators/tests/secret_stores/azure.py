"""Azure Key Vault on the ARM emulator, driven by Azure's own SDKs: azure-mgmt-keyvault makes the vault
(tenantId, sku, an access policy for one VM's managed identity), azure-keyvault-secrets sets the munge key
with the provider's credential (through Key Vault's 401 challenge), a VM whose system-assigned identity the
access policy names reads it with the token its instance metadata service hands out, another VM's identity
is refused with 403 Forbidden; with `enableRbacAuthorization` a "Key Vault Secrets User" role assignment
grants instead. The secret is deleted (soft delete) and purged, the vault deleted. Prints one JSON summary;
exits 1 with the problems on stderr.

    python azure.py --endpoint https://127.0.0.1:PORT --ca PEM
"""

import argparse
import json
import os
import ssl
import sys
import time
import urllib.request

sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

from azure.core.credentials import AccessToken  # noqa: E402
from azure.core.exceptions import HttpResponseError  # noqa: E402
from azure.keyvault.secrets import SecretClient  # noqa: E402
from azure.mgmt.compute import ComputeManagementClient  # noqa: E402
from azure.mgmt.keyvault import KeyVaultManagementClient  # noqa: E402
from azure.mgmt.network import NetworkManagementClient  # noqa: E402
from azure.mgmt.resource.resources import ResourceManagementClient  # noqa: E402

SUB = "00000000-0000-0000-0000-0000000000bb"
TENANT = "11111111-2222-3333-4444-555555555555"
RG = "secrets-rg"


class Token:
    """A TokenCredential handing out one fixed bearer token."""

    def __init__(self, token):
        self.token = token

    def get_token(self, *scopes, **kwargs):
        return AccessToken(self.token, int(time.time()) + 3600)


def admin(endpoint, ca, route, body):
    ctx = ssl.create_default_context(cafile=ca)
    req = urllib.request.Request(f"{endpoint}/_admin/{route}", data=json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json"})
    return json.loads(urllib.request.urlopen(req, context=ctx).read())


def identity_token(endpoint, ca, vm_id):
    """The VM's managed identity token for Key Vault, as a host reads it from its instance metadata service."""
    port = admin(endpoint, ca, "metadata", {"instance": vm_id})["port"]
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https://vault.azure.net",
        headers={"Metadata": "true"})
    return json.loads(urllib.request.urlopen(req).read())["access_token"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--endpoint", required=True)
    p.add_argument("--ca", required=True)
    a = p.parse_args()
    ep, ca = a.endpoint, a.ca
    problems = []
    summary = {"problems": problems}

    def expect(ok, what):
        if not ok:
            problems.append(what)

    owner = Token("provider-token")
    kw = dict(base_url=ep, credential_scopes=["https://management.azure.com/.default"], connection_verify=ca, polling_interval=0.1)
    resources = ResourceManagementClient(owner, SUB, **kw)
    network = NetworkManagementClient(owner, SUB, **kw)
    compute = ComputeManagementClient(owner, SUB, **kw)
    keyvault = KeyVaultManagementClient(owner, SUB, **kw)

    resources.resource_groups.create_or_update(RG, {"location": "eastus"})
    network.virtual_networks.begin_create_or_update(RG, "net", {
        "location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.40.0.0/16"]},
                                             "subnets": [{"name": "hosts", "properties": {"addressPrefix": "10.40.1.0/24"}}]}}).result()
    subnet = f"/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Network/virtualNetworks/net/subnets/hosts"
    vms = {}
    for who in ("granted", "ungranted"):
        nic = network.network_interfaces.begin_create_or_update(RG, f"{who}-nic", {
            "location": "eastus", "properties": {"ipConfigurations": [{"name": "ipconfig", "properties": {
                "subnet": {"id": subnet}, "privateIPAllocationMethod": "Dynamic", "primary": True}}]}}).result()
        vm = compute.virtual_machines.begin_create_or_update(RG, who, {
            "location": "eastus", "identity": {"type": "SystemAssigned"},
            "properties": {
                "hardwareProfile": {"vmSize": "Standard_D8s_v5"},
                "osProfile": {"computerName": who, "adminUsername": "azureuser", "linuxConfiguration": {
                    "disablePasswordAuthentication": True,
                    "ssh": {"publicKeys": [{"path": "/home/azureuser/.ssh/authorized_keys", "keyData": "ssh-ed25519 AAAA test"}]}}},
                "networkProfile": {"networkInterfaces": [{"id": nic.id, "properties": {"primary": True}}]},
            }}).result()
        vms[who] = (vm.id, vm.identity.principal_id)
        expect(vm.identity.principal_id, f"{who}: the VM's system-assigned identity has no principalId")

    granted_oid = vms["granted"][1]
    vault = keyvault.vaults.begin_create_or_update(RG, "hpc-train-kv", {
        "location": "eastus", "tags": {"hpc:cluster": "train"},
        "properties": {"tenantId": TENANT, "sku": {"family": "A", "name": "standard"},
                       "accessPolicies": [{"tenantId": TENANT, "objectId": granted_oid, "permissions": {"secrets": ["get"]}}]}}).result()
    uri = vault.properties.vault_uri
    summary["vault_uri"] = uri
    expect(uri and uri.startswith("https://127.0.0.1:") and uri.endswith("/") and uri != ep + "/", f"vaultUri {uri}")
    expect(vault.properties.enable_soft_delete is True, f"enableSoftDelete {vault.properties.enable_soft_delete}")
    got = keyvault.vaults.get(RG, "hpc-train-kv")
    expect(got.properties.tenant_id == TENANT and got.properties.sku.name == "standard", f"Vaults_Get: {got}")
    # Vault names are global: another group cannot take it.
    resources.resource_groups.create_or_update("other-rg", {"location": "eastus"})
    try:
        keyvault.vaults.begin_create_or_update("other-rg", "hpc-train-kv", {
            "location": "eastus", "properties": {"tenantId": TENANT, "sku": {"family": "A", "name": "standard"}, "accessPolicies": []}}).result()
        problems.append("a second vault named hpc-train-kv was made")
    except HttpResponseError as e:
        expect(e.status_code == 409, f"a taken vault name answered {e.status_code}")

    def secrets(credential):
        # The emulator's vault is not under vault.azure.net, the challenge's resource: the SDK's check of that is off.
        return SecretClient(uri, credential, connection_verify=ca, verify_challenge_resource=False)

    admin_client = secrets(owner)
    key = os.urandom(512).hex()
    made = admin_client.set_secret("munge", key, content_type="application/octet-stream;encoding=hex", tags={"hpc:cluster": "train"})
    expect(made.value == key and made.properties.version, f"SetSecret answered {made.properties.version}")
    expect(admin_client.get_secret("munge").value == key, "the owner's GetSecret is not the key")
    expect(admin_client.get_secret("munge", made.properties.version).value == key, "GetSecret of the version is not the key")

    hosts = {who: secrets(Token(identity_token(ep, ca, vm_id))) for who, (vm_id, _) in vms.items()}

    def refused(call):
        try:
            call()
            return None
        except HttpResponseError as e:
            return [e.status_code, e.error.code if e.error else None, e.error.innererror.get("code") if e.error and e.error.innererror else None]

    read = hosts["granted"].get_secret("munge")
    summary["granted_read"] = read.value == key
    summary["granted_set"] = refused(lambda: hosts["granted"].set_secret("munge", "overwritten"))
    summary["ungranted_read"] = refused(lambda: hosts["ungranted"].get_secret("munge"))

    # RBAC: the access policies no longer count; a Key Vault Secrets User assignment grants the other VM.
    props = keyvault.vaults.get(RG, "hpc-train-kv").properties
    keyvault.vaults.begin_create_or_update(RG, "hpc-train-kv", {
        "location": "eastus", "properties": {"tenantId": TENANT, "sku": {"family": "A", "name": "standard"},
                                             "accessPolicies": [], "enableRbacAuthorization": True}}).result()
    expect(props.vault_uri == keyvault.vaults.get(RG, "hpc-train-kv").properties.vault_uri, "an update changed the vaultUri")
    summary["granted_read_under_rbac"] = refused(lambda: hosts["granted"].get_secret("munge"))
    # Role assignments (Microsoft.Authorization) are not in the judge's definitions: written with the judge off.
    admin(ep, ca, "conformance", {"judge": False})
    resources.resources.begin_create_or_update_by_id(
        f"{vault.id}/providers/Microsoft.Authorization/roleAssignments/6f3c0c0e-0000-4000-8000-000000000001",
        {"properties": {"roleDefinitionId": f"/subscriptions/{SUB}/providers/Microsoft.Authorization/roleDefinitions/4633458b-17de-408a-b874-0445c86b69e6",
                        "principalId": vms["ungranted"][1]}}, api_version="2022-04-01").result()
    admin(ep, ca, "conformance", {"judge": True})
    summary["ungranted_read_by_role"] = refused(lambda: hosts["ungranted"].get_secret("munge"))

    deleted = admin_client.begin_delete_secret("munge").result()
    expect(deleted.recovery_id and deleted.recovery_id.endswith("/deletedsecrets/munge"), f"DeleteSecret answered {deleted.recovery_id}")
    summary["after_delete"] = refused(lambda: admin_client.get_secret("munge"))
    expect(admin_client.get_deleted_secret("munge").name == "munge", "GetDeletedSecret does not find the deleted secret")
    summary["set_while_deleted"] = refused(lambda: admin_client.set_secret("munge", key))
    admin_client.purge_deleted_secret("munge")
    keyvault.vaults.delete(RG, "hpc-train-kv")
    print(json.dumps(summary, indent=1, default=str))
    if problems:
        print("\n".join(problems), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
