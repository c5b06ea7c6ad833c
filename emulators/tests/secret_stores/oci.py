"""OCI Vault on the OCI emulator, driven by Oracle's `oci` SDK: the provider's API key makes a compartment, a
KMS vault (waiting for ACTIVE), an AES key on the vault's management endpoint and the munge key as a secret
with base64 content; two instances launch in the compartment; a dynamic group whose matching rule names one of
them and a policy letting that group read secret bundles of that secret are written through the Identity API
(with a group whose rule is not understood, and one holding the other instance by ALL of its compartment and
id that may read only the other secret).
Each instance then signs as itself with the SDK's InstancePrincipalsSecurityTokenSigner (its certificates from
its metadata listener, a security token from the emulator's federation endpoint): the granted one reads the
bundle by id and by name, the other, and the granted one on another secret, are refused with 404
NotAuthorizedOrNotFound; a forged security token is refused with 401. The secrets, key and vault are scheduled for deletion, the rest deleted. Prints one
JSON summary; exits 1 with the problems on stderr.

    python oci.py --endpoint http://127.0.0.1:PORT --tenancy T --user U --fingerprint F --key-file PEM
"""

import argparse
import base64
import json
import os
import sys
import time
import urllib.request

# This file is oci.py: its directory must not shadow the SDK's `oci` package.
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import oci  # noqa: E402

AD = "Uocm:US-ASHBURN-AD-1"


def admin(endpoint, route, body):
    req = urllib.request.Request(f"{endpoint}/_admin/{route}", data=json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json"})
    return json.loads(urllib.request.urlopen(req).read())


def wait_for(get, states, what):
    """Polls `get()` until its lifecycle_state is one of `states` (a few seconds at most)."""
    for _ in range(50):
        got = get().data
        if got.lifecycle_state in states:
            return got
        time.sleep(0.1)
    raise RuntimeError(f"{what} is still {got.lifecycle_state}, not {states}")


def main():
    p = argparse.ArgumentParser()
    for flag in ("endpoint", "tenancy", "user", "fingerprint", "key-file"):
        p.add_argument(f"--{flag}", required=True)
    a = p.parse_args()
    ep = a.endpoint.rstrip("/")
    problems = []
    summary = {"problems": problems}

    def expect(ok, what):
        if not ok:
            problems.append(what)

    def refused(call, *args, **kwargs):
        try:
            call(*args, **kwargs)
            return None
        except oci.exceptions.ServiceError as e:
            return [e.status, e.code]

    config = {"user": a.user, "tenancy": a.tenancy, "fingerprint": a.fingerprint, "key_file": a.key_file, "region": "us-ashburn-1"}
    oci.config.validate_config(config)
    kw = {"service_endpoint": ep, "retry_strategy": oci.retry.NoneRetryStrategy()}
    identity = oci.identity.IdentityClient(config, **kw)
    vn = oci.core.VirtualNetworkClient(config, **kw)
    compute = oci.core.ComputeClient(config, **kw)
    kms_vaults = oci.key_management.KmsVaultClient(config, **kw)
    vaults = oci.vault.VaultsClient(config, **kw)
    secrets = oci.secrets.SecretsClient(config, **kw)

    compartment = identity.create_compartment(oci.identity.models.CreateCompartmentDetails(
        compartment_id=a.tenancy, name="hpc-secrets", description="the cluster's secrets and hosts")).data.id

    vault = kms_vaults.create_vault(oci.key_management.models.CreateVaultDetails(
        compartment_id=compartment, display_name="train-vault", vault_type="DEFAULT")).data
    expect(vault.lifecycle_state == "CREATING", f"create_vault answered {vault.lifecycle_state}")
    vault = wait_for(lambda: kms_vaults.get_vault(vault.id), ["ACTIVE"], "the vault")
    summary["management_endpoint"] = vault.management_endpoint
    expect(vault.management_endpoint.startswith("http://127.0.0.1:") and vault.management_endpoint != ep,
           f"managementEndpoint {vault.management_endpoint} is not a listener of the vault's own")
    management = oci.key_management.KmsManagementClient(config, service_endpoint=vault.management_endpoint,
                                                        retry_strategy=oci.retry.NoneRetryStrategy())
    key = management.create_key(oci.key_management.models.CreateKeyDetails(
        compartment_id=compartment, display_name="train-munge-key",
        key_shape=oci.key_management.models.KeyShape(algorithm="AES", length=32))).data
    key = wait_for(lambda: management.get_key(key.id), ["ENABLED"], "the key")
    expect(key.vault_id == vault.id, f"the key's vaultId is {key.vault_id}")
    # The main endpoint has no key operations: CreateKey needs the vault's own.
    summary["key_on_main_endpoint"] = refused(oci.key_management.KmsManagementClient(config, **kw).get_key, key.id)

    munge = os.urandom(1024)

    def create_secret(name, content):
        return vaults.create_secret(oci.vault.models.CreateSecretDetails(
            compartment_id=compartment, vault_id=vault.id, key_id=key.id, secret_name=name,
            freeform_tags={"hpc-cluster": "train"},
            secret_content=oci.vault.models.Base64SecretContentDetails(
                content_type="BASE64", content=base64.b64encode(content).decode()))).data

    secret = create_secret("train-munge", munge)
    secret = wait_for(lambda: vaults.get_secret(secret.id), ["ACTIVE"], "the secret")
    other_content = os.urandom(1024)
    other = create_secret("other-munge", other_content)
    summary["duplicate_name"] = refused(create_secret, "train-munge", munge)
    listed = vaults.list_secrets(compartment, name="train-munge").data
    expect([s.id for s in listed] == [secret.id], f"list_secrets(name=train-munge): {[s.id for s in listed]}")
    own = secrets.get_secret_bundle(secret.id).data
    expect(base64.b64decode(own.secret_bundle_content.content) == munge, "the API key's user read another value")

    # Two instances in the compartment.
    vcn = vn.create_vcn(oci.core.models.CreateVcnDetails(compartment_id=compartment, cidr_blocks=["10.40.0.0/16"],
                                                         display_name="secrets-vcn")).data
    wait_for(lambda: vn.get_vcn(vcn.id), ["AVAILABLE"], "the VCN")
    subnet = vn.create_subnet(oci.core.models.CreateSubnetDetails(compartment_id=compartment, vcn_id=vcn.id,
                                                                  cidr_block="10.40.1.0/24", display_name="secrets-subnet")).data
    wait_for(lambda: vn.get_subnet(subnet.id), ["AVAILABLE"], "the subnet")
    instances = {}
    for who in ("granted", "ungranted"):
        instances[who] = compute.launch_instance(oci.core.models.LaunchInstanceDetails(
            compartment_id=compartment, availability_domain=AD, shape="VM.Standard.E5.Flex", display_name=f"node-{who}",
            source_details=oci.core.models.InstanceSourceViaImageDetails(image_id="ocid1.image.oc1..debian"),
            create_vnic_details=oci.core.models.CreateVnicDetails(subnet_id=subnet.id))).data.id

    # Who may read: a dynamic group naming the granted instance, and a policy for that one secret. A second group
    # whose rule is not understood here (a tag) is granted everything, and so matches no one.
    # A third group holds the other instance by ALL of its compartment and its id, and may read the other secret.
    groups = [identity.create_dynamic_group(oci.identity.models.CreateDynamicGroupDetails(
        compartment_id=a.tenancy, name=name, description="hosts of the train cluster", matching_rule=rule)).data.id
        for name, rule in [("train-munge-readers", f"ANY {{instance.id = '{instances['granted']}', instance.id = 'ocid1.instance.oc1..gone'}}"),
                           ("train-tagged", "tag.hpc.role.value = 'node'"),
                           ("other-readers", f"ALL {{instance.compartment.id = '{compartment}', instance.id = \"{instances['ungranted']}\"}}")]]
    policy = identity.create_policy(oci.identity.models.CreatePolicyDetails(
        compartment_id=a.tenancy, name="train-munge-read", description="the train cluster's hosts read its munge key",
        statements=[f"Allow dynamic-group train-munge-readers to read secret-bundles in compartment hpc-secrets "
                    f"where target.secret.id = '{secret.id}'",
                    "Allow dynamic-group train-tagged to read secret-bundles in compartment hpc-secrets",
                    f"allow dynamic-group other-readers to use secret-family in compartment id {compartment} "
                    f"where target.secret.id = '{other.id}'"])).data
    expect(policy.lifecycle_state == "ACTIVE", f"create_policy answered {policy.lifecycle_state}")

    hosts = {}
    for who, instance in instances.items():
        port = admin(ep, "metadata", {"instance": instance})["port"]
        os.environ["OCI_METADATA_BASE_URL"] = f"http://127.0.0.1:{port}/opc/v2"
        signer = oci.auth.signers.InstancePrincipalsSecurityTokenSigner(federation_endpoint=f"{ep}/v1/x509")
        expect(signer.tenancy_id == a.tenancy, f"{who}: the leaf certificate names tenancy {signer.tenancy_id}")
        expect(signer.region == "us-ashburn-1", f"{who}: the signer's region is {signer.region}")
        claims = signer.federation_client.security_token.get_jwt()
        expect(claims.get("opc-instance") == instance, f"{who}: the token's claims {claims}")
        hosts[who] = {"secrets": oci.secrets.SecretsClient({}, signer=signer, **kw),
                      "vaults": oci.vault.VaultsClient({}, signer=signer, **kw), "signer": signer}
    del os.environ["OCI_METADATA_BASE_URL"]

    bundle = hosts["granted"]["secrets"].get_secret_bundle(secret.id).data
    by_name = hosts["granted"]["secrets"].get_secret_bundle_by_name(secret_name="train-munge", vault_id=vault.id).data
    summary["granted_read"] = base64.b64decode(bundle.secret_bundle_content.content) == munge
    expect(summary["granted_read"], "the granted host read another value")
    expect(base64.b64decode(by_name.secret_bundle_content.content) == munge, "the granted host read another value by name")
    expect(bundle.version_number == 1 and "CURRENT" in bundle.stages, f"the bundle: version {bundle.version_number}, {bundle.stages}")
    summary["granted_other_secret"] = refused(hosts["granted"]["secrets"].get_secret_bundle, other.id)
    summary["granted_get_secret"] = refused(hosts["granted"]["vaults"].get_secret, secret.id)
    summary["ungranted_read"] = refused(hosts["ungranted"]["secrets"].get_secret_bundle, secret.id)
    summary["ungranted_reads_other"] = base64.b64decode(
        hosts["ungranted"]["secrets"].get_secret_bundle(other.id).data.secret_bundle_content.content) == other_content
    # A token the federation endpoint did not hand out, signed with a real session key, is not anyone's.
    session_key = hosts["granted"]["signer"].federation_client.session_key_supplier.get_key_pair()["private"]
    token = hosts["granted"]["signer"].federation_client.security_token.security_token
    forged = oci.auth.signers.SecurityTokenSigner(token[:-4] + "AAAA", session_key)
    summary["forged_token"] = refused(oci.secrets.SecretsClient({}, signer=forged, **kw).get_secret_bundle, secret.id)
    summary["ungranted_read_by_name"] = refused(hosts["ungranted"]["secrets"].get_secret_bundle_by_name,
                                                secret_name="train-munge", vault_id=vault.id)

    # A destroy: the secrets, the key and the vault are scheduled for deletion (OCI deletes them days later).
    for s in (secret, other):
        vaults.schedule_secret_deletion(s.id, oci.vault.models.ScheduleSecretDeletionDetails())
    scheduled = wait_for(lambda: vaults.get_secret(secret.id), ["PENDING_DELETION"], "the secret")
    expect(scheduled.time_of_deletion is not None, "a secret pending deletion has no timeOfDeletion")
    summary["granted_read_after_deletion"] = refused(hosts["granted"]["secrets"].get_secret_bundle, secret.id)
    management.schedule_key_deletion(key.id, oci.key_management.models.ScheduleKeyDeletionDetails())
    kms_vaults.schedule_vault_deletion(vault.id, oci.key_management.models.ScheduleVaultDeletionDetails())
    wait_for(lambda: kms_vaults.get_vault(vault.id), ["PENDING_DELETION"], "the vault")
    identity.delete_policy(policy.id)
    for group in groups:
        identity.delete_dynamic_group(group)
    for instance in instances.values():
        compute.terminate_instance(instance)
    for instance in instances.values():
        wait_for(lambda: compute.get_instance(instance), ["TERMINATED"], "an instance")
    vn.delete_subnet(subnet.id)
    vn.delete_vcn(vcn.id)
    identity.delete_compartment(compartment)
    print(json.dumps(summary, indent=1, default=str))
    if problems:
        print("\n".join(problems), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
