"""Secrets Manager on the AWS emulator: who may call it, decided by the caller's identity.

moto serves Secrets Manager itself (CreateSecret with its ClientRequestToken rules, GetSecretValue,
DescribeSecret, ListSecrets and its filters, TagResource, Put/GetResourcePolicy, DeleteSecret). moto checks
no permission, so this module does, for the callers it can name:

- A caller signing with role credentials that an instance's metadata service handed out (imds.py records
  each access key it issues with its role) is that role's session. Every Secrets Manager call it makes is
  allowed only when the role's identity policies (inline and attached managed ones) or the secret's resource
  policy allow `secretsmanager:<Operation>` on the secret's ARN, and nothing denies it. Otherwise the answer
  is Secrets Manager's `AccessDeniedException` (HTTP 400, as the JSON 1.1 protocol sends it).
- Any other caller (the provider's and the tests' own credentials, `test`/`test`) is the account's
  administrator and may do everything.

The policy grammar understood is small, and what it does not understand never grants:
- statements with `Effect` `Allow` or `Deny`, `Action` (a string or a list; `*` and `?` wildcards, compared
  without case) and `Resource` (a string or a list of ARNs with `*` and `?` wildcards);
- in a resource policy, `Principal` `"*"`, `{"AWS": "*"}` or `{"AWS": <the role's ARN or the session's
  assumed-role ARN>}` (a string or a list). An account principal (`arn:aws:iam::<account>:root`) delegates to
  identity policies, as it does in IAM, and grants nothing by itself.
- A statement with `Condition`, `NotAction`, `NotResource` or `NotPrincipal` is not understood: an Allow of
  that kind grants nothing; a Deny of that kind denies.
"""

from __future__ import annotations

import fnmatch
import json
import threading
import uuid

# Access key id -> {"account", "role", "instance"}: the role credentials the metadata services issued.
ISSUED = {}
_issued_lock = threading.Lock()

NOT_UNDERSTOOD = ("Condition", "NotAction", "NotResource", "NotPrincipal")


def remember(access_key, account, role, instance):
    with _issued_lock:
        ISSUED[access_key] = {"account": account, "role": role, "instance": instance}


def forget_all():
    with _issued_lock:
        ISSUED.clear()


def credential_scope(environ):
    """(access key id, region) of a SigV4-signed request, else (None, None)."""
    auth = environ.get("HTTP_AUTHORIZATION", "")
    if "Credential=" not in auth:
        return None, None
    parts = auth.split("Credential=", 1)[1].split(",", 1)[0].split("/")
    return (parts[0], parts[2]) if len(parts) >= 5 else (parts[0], None)


def caller(environ):
    """The instance role session a request is signed by, or None for the administrator."""
    key, region = credential_scope(environ)
    with _issued_lock:
        found = ISSUED.get(key)
    if found is None:
        return None
    return {**found, "region": region}


def _list(v):
    return v if isinstance(v, list) else [v]


def _matches(patterns, value, case=True):
    for p in _list(patterns):
        if not isinstance(p, str):
            continue
        if case:
            if fnmatch.fnmatchcase(value, p):
                return True
        elif fnmatch.fnmatchcase(value.lower(), p.lower()):
            return True
    return False


def _statements(document):
    try:
        doc = json.loads(document) if isinstance(document, str) else document
    except ValueError:
        return []
    if not isinstance(doc, dict):
        return []
    return [s for s in _list(doc.get("Statement") or []) if isinstance(s, dict)]


def _principal_matches(principal, arns):
    if principal == "*":
        return True
    if not isinstance(principal, dict) or set(principal) - {"AWS"}:
        return False
    return any(p == "*" or p in arns for p in _list(principal.get("AWS")) if isinstance(p, str))


def _verdict(statements, action, resource, principals=None):
    """("deny" | "allow" | None) of a list of statements for one action on one resource."""
    allowed = False
    for s in statements:
        effect = s.get("Effect")
        odd = any(k in s for k in NOT_UNDERSTOOD)
        if principals is not None and not odd and not _principal_matches(s.get("Principal"), principals):
            continue
        if effect == "Deny" and (odd or (_matches(s.get("Action"), action, case=False) and _matches(s.get("Resource"), resource))):
            return "deny"
        if effect == "Allow" and not odd and _matches(s.get("Action"), action, case=False) and _matches(s.get("Resource"), resource):
            allowed = True
    return "allow" if allowed else None


def _role(account, name):
    from moto.iam.models import iam_backends
    backend = iam_backends[account]["global"]
    for role in backend.roles.values():
        if role.name == name:
            return role
    return None


def _identity_documents(role):
    docs = list(role.policies.values())
    for policy in role.managed_policies.values():
        for version in policy.versions:
            if version.is_default_version:
                docs.append(version.document)
    return docs


def _secret(account, region, secret_id):
    from moto.secretsmanager.models import secretsmanager_backends
    if not secret_id or not region:
        return None
    secret = secretsmanager_backends[account][region].secrets.get(secret_id)
    return secret


def refusal(environ, operation, body):
    """None when the caller may make this Secrets Manager call, else (status, headers, body) of the
    AccessDeniedException Secrets Manager answers."""
    who = caller(environ)
    if who is None:
        return None
    try:
        params = json.loads(body or b"{}")
    except ValueError:
        params = {}
    secret_id = params.get("SecretId") if isinstance(params, dict) else None
    secret = _secret(who["account"], who["region"], secret_id)
    resource = secret.arn if secret is not None else (secret_id if isinstance(secret_id, str) and secret_id.startswith("arn:") else "*")
    action = f"secretsmanager:{operation}"
    role = _role(who["account"], who["role"])
    role_arn = role.arn if role is not None else f"arn:aws:iam::{who['account']}:role/{who['role']}"
    session = f"arn:aws:sts::{who['account']}:assumed-role/{who['role']}/{who['instance']}"
    identity = [s for doc in (_identity_documents(role) if role is not None else []) for s in _statements(doc)]
    by_identity = _verdict(identity, action, resource)
    by_resource = _verdict(_statements(secret.policy), action, resource, principals={role_arn, session}) if secret is not None and secret.policy else None
    if "deny" not in (by_identity, by_resource) and "allow" in (by_identity, by_resource):
        return None
    why = ("with an explicit deny" if "deny" in (by_identity, by_resource)
           else "because no identity-based policy allows the " + action + " action")
    message = f"User: {session} is not authorized to perform: {action} on resource: {secret_id or '*'} {why}"
    payload = json.dumps({"__type": "AccessDeniedException", "Message": message}).encode()
    headers = [("Content-Type", "application/x-amz-json-1.1"), ("x-amzn-RequestId", str(uuid.uuid4())),
               ("Content-Length", str(len(payload)))]
    return 400, headers, payload


def live_secrets(region=None):
    """(region, secret) of every secret not scheduled for deletion."""
    from moto.secretsmanager.models import secretsmanager_backends
    for account, regions in secretsmanager_backends.items():
        for name, backend in regions.items():
            if region and name != region:
                continue
            for secret in list(backend.secrets.values()):
                if getattr(secret, "is_deleted", lambda: False)():
                    continue
                yield name, secret


def snapshot_of(secret):
    return {"kind": "secret", "name": secret.name, "policy": bool(getattr(secret, "policy", None)),
            "versions": sorted(getattr(secret, "versions", {}) or {}),
            "tags": {t["Key"]: t["Value"] for t in (secret.tags or [])}}


def apply_patches():
    """Where moto's answers differ from Secrets Manager's: it writes both spellings of a secret's version map in
    DescribeSecret and ListSecrets (the model has `VersionIdsToStages` in DescribeSecretResponse and
    `SecretVersionsToStages` in a ListSecrets entry only), and answers not-found errors with 404."""
    from moto.secretsmanager.responses import SecretsManagerResponse

    if getattr(SecretsManagerResponse, "_hpc_patched", False):
        return
    describe, listing = SecretsManagerResponse.describe_secret, SecretsManagerResponse.list_secrets

    def describe_secret(self):
        answer = json.loads(describe(self))
        answer.pop("SecretVersionsToStages", None)
        return json.dumps(answer)

    def list_secrets(self):
        answer = json.loads(listing(self))
        for entry in answer.get("SecretList") or []:
            entry.pop("VersionIdsToStages", None)
        return json.dumps(answer)

    # Secrets Manager answers every error of the caller's with HTTP 400 (its API reference, "Errors"); moto
    # gives its not-found ones 404.
    from moto.secretsmanager import exceptions

    for cls in (exceptions.ResourceNotFoundException, exceptions.SecretNotFoundException,
                exceptions.SecretHasNoValueException, exceptions.SecretStageVersionMismatchException):
        def init(self, *args, _orig=cls.__init__, **kwargs):
            _orig(self, *args, **kwargs)
            self.code = 400
        cls.__init__ = init
    SecretsManagerResponse.describe_secret = describe_secret
    SecretsManagerResponse.list_secrets = list_secrets
    SecretsManagerResponse._hpc_patched = True
