"""Secret Manager v1 on the Google Cloud emulator, driven by google-api-python-client (its bundled
secretmanager.v1 discovery document): the provider's (anonymous) credentials make a secret with labels, add
the munge key as a version with its CRC32C and grant one instance's service account
roles/secretmanager.secretAccessor in the secret's IAM policy; that instance reads `versions/latest:access`
with the token its metadata server hands out, another instance's service account is refused with 403
PERMISSION_DENIED; the secret is deleted. Prints one JSON summary; exits 1 with the problems on stderr.

    python gcp.py --endpoint http://127.0.0.1:PORT
"""

import argparse
import base64
import json
import os
import sys
import urllib.request

sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import crc32c  # noqa: E402
import google.auth.credentials  # noqa: E402
import google.oauth2.credentials  # noqa: E402
import googleapiclient.errors  # noqa: E402
from googleapiclient import discovery  # noqa: E402

PROJECT = "secrets-proj"
ZONE = "us-central1-a"


def admin(endpoint, route, body):
    req = urllib.request.Request(f"{endpoint}/_admin/{route}", data=json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json"})
    return json.loads(urllib.request.urlopen(req).read())


def token_of(endpoint, instance):
    """The instance's service account token, read as a host reads it from its metadata server."""
    port = admin(endpoint, "metadata", {"instance": instance})["port"]
    req = urllib.request.Request(f"http://127.0.0.1:{port}/computeMetadata/v1/instance/service-accounts/default/token",
                                 headers={"Metadata-Flavor": "Google"})
    return json.loads(urllib.request.urlopen(req).read())["access_token"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--endpoint", required=True)
    a = p.parse_args()
    ep = a.endpoint.rstrip("/")
    problems = []
    summary = {"problems": problems}

    def expect(ok, what):
        if not ok:
            problems.append(what)

    anonymous = google.auth.credentials.AnonymousCredentials()
    compute = discovery.build("compute", "v1", static_discovery=True, credentials=anonymous,
                              client_options={"api_endpoint": f"{ep}/compute/v1/"})

    def secretmanager(credentials):
        return discovery.build("secretmanager", "v1", static_discovery=True, credentials=credentials,
                               client_options={"api_endpoint": f"{ep}/"})

    sm = secretmanager(anonymous)
    secrets = sm.projects().secrets()

    made = secrets.create(parent=f"projects/{PROJECT}", secretId="train-munge",
                          body={"replication": {"automatic": {}}, "labels": {"hpc-cluster": "train", "hpc-role": "munge"}}).execute()
    name = made["name"]
    summary["name"] = name
    expect(name.startswith("projects/") and name.endswith("/secrets/train-munge") and name.split("/")[1].isdigit(),
           f"the secret's name {name} is not projects/<number>/secrets/train-munge")
    try:
        secrets.create(parent=f"projects/{PROJECT}", secretId="train-munge", body={"replication": {"automatic": {}}}).execute()
        problems.append("a second create of train-munge was accepted")
    except googleapiclient.errors.HttpError as e:
        expect(e.resp.status == 409, f"a second create answered {e.resp.status}")
    secrets.create(parent=f"projects/{PROJECT}", secretId="other-munge",
                   body={"replication": {"automatic": {}}, "labels": {"hpc-cluster": "other"}}).execute()

    key = os.urandom(1024)
    version = secrets.addVersion(parent=name, body={"payload": {
        "data": base64.b64encode(key).decode(), "dataCrc32c": str(crc32c.crc32c(key))}}).execute()
    expect(version["name"] == f"{name}/versions/1" and version["state"] == "ENABLED", f"addVersion answered {version}")
    expect(version.get("clientSpecifiedPayloadChecksum") is True, f"addVersion answered {version}")
    try:
        secrets.addVersion(parent=name, body={"payload": {"data": base64.b64encode(key).decode(), "dataCrc32c": "1"}}).execute()
        problems.append("a version whose dataCrc32c is wrong was added")
    except googleapiclient.errors.HttpError as e:
        expect(e.resp.status == 400, f"a wrong checksum answered {e.resp.status}")

    got = secrets.get(name=f"projects/{PROJECT}/secrets/train-munge").execute()
    expect(got["labels"] == {"hpc-cluster": "train", "hpc-role": "munge"}, f"get answered {got}")
    listed = secrets.list(parent=f"projects/{PROJECT}", filter="labels.hpc-cluster=train").execute()
    expect([s["name"] for s in listed.get("secrets", [])] == [name], f"list by label answered {listed}")

    # Two instances, each with a service account of its own; the secret's policy grants one of them.
    compute.networks().insert(project=PROJECT, body={"name": "sec-net", "autoCreateSubnetworks": False}).execute()
    compute.subnetworks().insert(project=PROJECT, region="us-central1", body={
        "name": "sec-sub", "network": f"projects/{PROJECT}/global/networks/sec-net", "ipCidrRange": "10.30.0.0/24"}).execute()
    instances = {}
    for who in ("granted", "ungranted"):
        compute.instances().insert(project=PROJECT, zone=ZONE, body={
            "name": f"node-{who}", "machineType": f"zones/{ZONE}/machineTypes/n2-standard-4",
            "disks": [{"boot": True, "autoDelete": True, "initializeParams": {
                "sourceImage": "projects/debian-cloud/global/images/debian-12-bookworm-v20260101", "diskSizeGb": "50"}}],
            "networkInterfaces": [{"network": f"projects/{PROJECT}/global/networks/sec-net",
                                   "subnetwork": f"projects/{PROJECT}/regions/us-central1/subnetworks/sec-sub"}],
            "serviceAccounts": [{"email": f"{who}@{PROJECT}.iam.gserviceaccount.com",
                                 "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}],
        }).execute()
        instances[who] = f"projects/{PROJECT}/zones/{ZONE}/instances/node-{who}"

    policy = secrets.getIamPolicy(resource=name).execute()
    policy["bindings"] = [{"role": "roles/secretmanager.secretAccessor",
                           "members": [f"serviceAccount:granted@{PROJECT}.iam.gserviceaccount.com"]},
                          # A condition is not understood: it grants nothing.
                          {"role": "roles/secretmanager.secretAccessor",
                           "members": [f"serviceAccount:ungranted@{PROJECT}.iam.gserviceaccount.com"],
                           "condition": {"title": "never", "expression": "request.time < timestamp('2000-01-01T00:00:00Z')"}}]
    set_policy = secrets.setIamPolicy(resource=name, body={"policy": policy}).execute()
    expect(len(set_policy.get("bindings", [])) == 2 and set_policy["etag"] != policy["etag"], f"setIamPolicy answered {set_policy}")
    expect(secrets.getIamPolicy(resource=name).execute()["bindings"] == set_policy["bindings"], "getIamPolicy is not what was set")

    hosts = {who: secretmanager(google.oauth2.credentials.Credentials(token_of(ep, inst))).projects().secrets()
             for who, inst in instances.items()}

    def refused(call):
        try:
            call.execute()
            return None
        except googleapiclient.errors.HttpError as e:
            body = json.loads(e.content or b"{}").get("error", {})
            return [e.resp.status, body.get("status"), body.get("message")]

    accessed = hosts["granted"].versions().access(name=f"{name}/versions/latest").execute()
    data = base64.b64decode(accessed["payload"]["data"])
    summary["granted_read"] = data == key
    expect(data == key, "the granted host read another value")
    expect(accessed["name"] == f"{name}/versions/1", f"access answered {accessed['name']}")
    expect(int(accessed["payload"]["dataCrc32c"]) == crc32c.crc32c(data), "the answer's dataCrc32c is not the data's")
    summary["granted_other_secret"] = refused(hosts["granted"].versions().access(name=f"projects/{PROJECT}/secrets/other-munge/versions/latest"))
    summary["granted_delete"] = refused(hosts["granted"].delete(name=name))
    summary["ungranted_read"] = refused(hosts["ungranted"].versions().access(name=f"{name}/versions/latest"))
    summary["granted_create"] = refused(hosts["granted"].create(parent=f"projects/{PROJECT}", secretId="mine",
                                                                   body={"replication": {"automatic": {}}}))

    for secret in (name, f"projects/{PROJECT}/secrets/other-munge"):
        secrets.delete(name=secret).execute()
    summary["after_delete"] = refused(secrets.versions().access(name=f"{name}/versions/latest"))
    expect(summary["after_delete"] and summary["after_delete"][0] == 404, f"access after the delete: {summary['after_delete']}")
    for who in instances:
        compute.instances().delete(project=PROJECT, zone=ZONE, instance=f"node-{who}").execute()
    print(json.dumps(summary, indent=1, default=str))
    if problems:
        print("\n".join(problems), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
