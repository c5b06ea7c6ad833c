"""EC2's instance metadata service (IMDS, v1 and v2) for the instances of the AWS emulator.

`POST /_admin/metadata {"instance": "i-..."}` opens one HTTP listener on 127.0.0.1 that answers as
169.254.169.254 answers that instance (a relay in front of a booted test host forwards its connections
there). Every request reads the instance as moto holds it now: tags, metadata options and state changed
later show at once; a terminated instance is unreachable (the connection closes unanswered).

What it serves follows the EC2 User Guide ("Instance metadata categories", "Retrieve instance metadata",
"How Instance Metadata Service Version 2 works", "Work with instance tags in instance metadata"):

- `PUT /latest/api/token` with `X-aws-ec2-metadata-token-ttl-seconds` (1 to 21600, else 400) makes a session
  token; a PUT carrying `X-Forwarded-For` is refused (403), and so is a PUT to a version's own path.
- Every GET may carry `X-aws-ec2-metadata-token`: an unknown or expired one is 401. Without one, a GET is
  answered only while the instance's `MetadataOptions.HttpTokens` is `optional` (IMDSv1), else 401.
- `MetadataOptions.HttpEndpoint` `disabled`: every request is 403 ("the IMDS is turned off").
- `/` lists the versions; each version (and `latest`) serves `meta-data/`, `user-data` (404 without any) and
  `dynamic/instance-identity/document`. A category appears in a dated version from the version that
  released it (the guide's "Version when category was released").
- `meta-data/tags/instance/` only when `MetadataOptions.InstanceMetadataTags` is `enabled` (404 otherwise);
  `iam/` only with an instance profile.
"""

from __future__ import annotations

import base64
import datetime
import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from moto.ec2.models import ec2_backends

import secrets_manager

# The dated builds of the metadata tree a client may ask for (the guide lists them at `/`), oldest first.
VERSIONS = [
    "1.0", "2007-01-19", "2007-03-01", "2007-08-29", "2007-10-10", "2007-12-15", "2008-02-01", "2008-09-01",
    "2009-04-04", "2011-01-01", "2011-05-01", "2012-01-12", "2014-02-25", "2014-11-05", "2015-10-20",
    "2016-04-19", "2016-06-30", "2016-09-02", "2018-03-28", "2018-08-17", "2018-09-24", "2019-10-01",
    "2020-10-27", "2021-01-03", "2021-03-23",
]
MAX_TTL = 21600
GONE = ("shutting-down", "terminated")
# Characters a tag key may use to appear in instance metadata ("letters, numbers, and + - = . , _ : @").
TAG_KEY_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-=.,_:@")


def _released(version, since):
    """Whether a category released in build `since` is in build `version` (`latest` has them all; builds are
    named by date, after 1.0, so they compare as text)."""
    return version == "latest" or version >= since


def find_instance(instance_id):
    """(backend, instance) for an instance id, whatever its account and region."""
    for regions in ec2_backends.values():
        for backend in regions.values():
            for reservation in backend.reservations.values():
                for instance in reservation.instances:
                    if instance.id == instance_id:
                        return backend, instance, reservation
    return None, None, None


def _tags(instance):
    return {t["key"]: t["value"] for t in (instance.get_tags() or [])}


def _iso(t):
    return datetime.datetime.fromtimestamp(t, tz=datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _launch_time(instance):
    lt = getattr(instance, "launch_time", None)
    if isinstance(lt, datetime.datetime):
        if lt.tzinfo is None:
            lt = lt.replace(tzinfo=datetime.timezone.utc)
        return lt.strftime("%Y-%m-%dT%H:%M:%SZ")
    return str(lt or "")


def _profile(backend, instance):
    """The instance profile associated with the instance, if any."""
    assoc = getattr(backend, "iam_instance_profile_associations", {}).get(instance.id)
    return getattr(assoc, "iam_instance_profile", None) if assoc is not None else None


def _user_data(instance):
    """The user data the instance was launched with (RunInstances' or its launch template's), as bytes."""
    data = instance.user_data
    if not data:
        return None
    if isinstance(data, (list, tuple)):
        data = data[0] if data else None
        if not data:
            return None
    if isinstance(data, bytes):
        raw = data
    else:
        raw = str(data).encode()
    try:
        return base64.b64decode(raw, validate=True)
    except Exception:
        return raw


def _interfaces(backend, instance):
    """Each attached interface's metadata (network/interfaces/macs/<mac>/), by MAC. The extension keys an
    instance's interfaces by network card and device index (card * 64 + device)."""
    out = {}
    for key, nic in sorted(instance.nics.items()):
        card = getattr(nic, "hpc_network_card_index", key // 64)
        device = nic.device_index if nic.device_index is not None else key % 64
        subnet = getattr(nic, "subnet", None)
        vpc = backend.vpcs.get(subnet.vpc_id) if subnet is not None else None
        entry = {
            "device-number": (str(device), "2011-01-01"),
            "interface-id": (nic.id, "2011-01-01"),
            "mac": (nic.mac_address, "2011-01-01"),
            "network-card": (str(card), "2020-11-01"),
            "owner-id": (backend.account_id, "2011-01-01"),
            "security-group-ids": ("\n".join(g.id for g in nic.group_set), "2011-01-01"),
            "security-groups": ("\n".join(g.name for g in nic.group_set), "2011-01-01"),
        }
        if nic.private_ip_address:
            # An EFA-only interface has no address, so neither of these.
            hostname = "ip-" + nic.private_ip_address.replace(".", "-") + instance.private_dns_name[instance.private_dns_name.index("."):]
            entry["local-hostname"] = (hostname, "2007-01-19")
            entry["local-ipv4s"] = (nic.private_ip_address, "2011-01-01")
        if subnet is not None:
            entry["subnet-id"] = (subnet.id, "2011-01-01")
            entry["subnet-ipv4-cidr-block"] = (subnet.cidr_block, "2011-01-01")
            entry["vpc-id"] = (subnet.vpc_id, "2011-01-01")
        if vpc is not None:
            entry["vpc-ipv4-cidr-block"] = (vpc.cidr_block, "2011-01-01")
            entry["vpc-ipv4-cidr-blocks"] = (vpc.cidr_block, "2016-06-30")
        if nic.public_ip:
            entry["public-ipv4s"] = (nic.public_ip, "2011-01-01")
        out[nic.mac_address] = (entry, "2011-01-01")
    return out


def meta_data(backend, instance, reservation, listener):
    """The `meta-data/` tree of one instance as it is now: {name: (value or subtree, released in)}."""
    tags = _tags(instance)
    nic0 = instance.nics.get(0)
    zone = instance.placement.zone or ""
    region = instance.region_name
    tree = {
        "ami-id": (instance.image_id, "1.0"),
        "ami-launch-index": (str(instance.ami_launch_index), "1.0"),
        "ami-manifest-path": ("(unknown)", "1.0"),
        "block-device-mapping": ({"ami": (instance.root_device_name, "2007-12-15"),
                                  "root": (instance.root_device_name, "2007-12-15")}, "2007-12-15"),
        "hostname": (instance.private_dns_name, "1.0"),
        "instance-action": ("none", "2008-09-01"),
        "instance-id": (instance.id, "1.0"),
        "instance-life-cycle": (getattr(instance, "instance_lifecycle", None) or "on-demand", "2019-10-01"),
        "instance-type": (instance.instance_type, "2007-08-29"),
        "local-hostname": (instance.private_dns_name, "2007-01-19"),
        "local-ipv4": (instance.private_ip, "1.0"),
        "placement": ({"availability-zone": (zone, "2008-02-01"), "region": (region, "2020-08-24")}, "2008-02-01"),
        "reservation-id": (reservation.id, "1.0"),
        "security-groups": ("\n".join(g.name for g in (nic0.group_set if nic0 else instance.security_groups)), "1.0"),
        "services": ({"domain": ("amazonaws.com", "2014-02-25"), "partition": ("aws", "2015-10-20")}, "2014-02-25"),
    }
    if nic0 is not None:
        tree["mac"] = (nic0.mac_address, "2011-01-01")
        tree["network"] = ({"interfaces": ({"macs": (_interfaces(backend, instance), "2011-01-01")}, "2011-01-01")}, "2011-01-01")
    if instance.public_ip:
        tree["public-ipv4"] = (instance.public_ip, "2007-01-19")
        tree["public-hostname"] = (instance.public_dns_name, "2007-01-19")
    if instance.placement.group_name:
        tree["placement"][0]["group-name"] = (instance.placement.group_name, "2020-08-24")
    if instance.key_name:
        key = backend.key_pairs.get(instance.key_name)
        material = (getattr(key, "material_public", None) or "") if key is not None else ""
        if isinstance(material, bytes):
            material = material.decode()
        tree["public-keys"] = ({"0": ({"openssh-key": (material.strip() + " " + instance.key_name, "1.0")}, "1.0")}, "1.0")
    profile = _profile(backend, instance)
    if profile is not None:
        roles = list(getattr(profile, "roles", []) or [])
        now = time.time()
        info = json.dumps({"Code": "Success", "LastUpdated": _iso(listener.started),
                           "InstanceProfileArn": profile.arn, "InstanceProfileId": profile.id}, indent=2)
        credentials = {}
        for role in roles:
            credentials[role.name] = (json.dumps(listener.credentials(role.name, now, backend.account_id), indent=2), "2012-01-12")
        tree["iam"] = ({"info": (info, "2012-01-12"), "security-credentials": (credentials, "2012-01-12")}, "2012-01-12")
    # Instance tags, only when the instance allows them in its metadata (InstanceMetadataTags).
    if instance.metadata_options.instance_metadata_tags == "enabled":
        usable = {k: v for k, v in tags.items()
                  if k and set(k) <= TAG_KEY_CHARS and k not in (".", "..", "_index")}
        tree["tags"] = ({"instance": ({k: (v, "2021-03-23") for k, v in usable.items()}, "2021-03-23")}, "2021-03-23")
    return tree


def identity_document(backend, instance):
    return json.dumps({
        "accountId": backend.account_id, "architecture": instance.architecture,
        "availabilityZone": instance.placement.zone, "billingProducts": None, "devpayProductCodes": None,
        "marketplaceProductCodes": None, "imageId": instance.image_id, "instanceId": instance.id,
        "instanceType": instance.instance_type, "kernelId": None, "pendingTime": _launch_time(instance),
        "privateIp": instance.private_ip, "ramdiskId": None, "region": instance.region_name, "version": "2017-09-30",
    }, indent=2)


def _listing(tree, version):
    names = []
    for name, (value, since) in sorted(tree.items()):
        if not _released(version, since):
            continue
        names.append(name + "/" if isinstance(value, dict) else name)
    return names


def _walk(tree, parts, version):
    """The value at `parts` under `tree`: a dict (a directory), a string (a leaf), or None (404)."""
    node = tree
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return None
        value, since = node[part]
        if not _released(version, since):
            return None
        node = value
    return node


class Listener:
    """One instance's metadata service."""

    def __init__(self, instance_id):
        self.instance_id = instance_id
        self.tokens = {}
        self.lock = threading.Lock()
        self.started = time.time()
        self._credentials = {}
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def credentials(self, role, now, account):
        """The role's temporary credentials, renewed as they near their end (as EC2 renews them). Each access
        key is remembered with its role, so that Secrets Manager knows who signs with it (secrets_manager.py)."""
        with self.lock:
            current = self._credentials.get(role)
            if current is None or current["_until"] - now < 300:
                until = now + 6 * 3600
                current = {"Code": "Success", "LastUpdated": _iso(now), "Type": "AWS-HMAC",
                           "AccessKeyId": "ASIA" + secrets.token_hex(8).upper(),
                           "SecretAccessKey": base64.b64encode(secrets.token_bytes(30)).decode(),
                           "Token": base64.b64encode(secrets.token_bytes(96)).decode(),
                           "Expiration": _iso(until), "_until": until}
                self._credentials[role] = current
                secrets_manager.remember(current["AccessKeyId"], account, role, self.instance_id)
            return {k: v for k, v in current.items() if not k.startswith("_")}

    def new_token(self, ttl):
        token = base64.urlsafe_b64encode(secrets.token_bytes(42)).decode()
        with self.lock:
            now = time.time()
            self.tokens = {t: until for t, until in self.tokens.items() if until > now}
            self.tokens[token] = now + ttl
        return token

    def token_valid(self, token):
        with self.lock:
            until = self.tokens.get(token)
        return until is not None and until > time.time()


def _handler(listener):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "EC2ws"
        sys_version = ""

        def log_message(self, *args):
            pass

        def _send(self, status, body=b"", content_type="text/plain", extra=()):
            if isinstance(body, str):
                body = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for k, v in extra:
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _error(self, status):
            reason = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
                      405: "Method Not Allowed"}[status]
            page = (f'<?xml version="1.0" encoding="iso-8859-1"?>\n<!DOCTYPE html>\n<html>\n <head>\n'
                    f"  <title>{status} - {reason}</title>\n </head>\n <body>\n  <h1>{status} - {reason}</h1>\n"
                    " </body>\n</html>\n")
            self._send(status, page, "text/html")

        def _instance(self):
            """The instance as moto holds it now, or None when it is gone: then the connection closes unanswered."""
            backend, instance, reservation = find_instance(listener.instance_id)
            if instance is None or instance.state in GONE:
                self.close_connection = True
                return None
            return backend, instance, reservation

        def do_PUT(self):
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            found = self._instance()
            if found is None:
                return
            _, instance, _ = found
            if instance.metadata_options.http_endpoint == "disabled":
                return self._error(403)
            path = self.path.split("?", 1)[0]
            if path != "/latest/api/token":
                # A token PUT to a version's own path (/2021-03-23/api/token) is refused by design.
                return self._error(403 if path.endswith("/api/token") else 405)
            if self.headers.get("X-Forwarded-For") is not None:
                return self._error(403)
            ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
            try:
                seconds = int(ttl)
            except (TypeError, ValueError):
                return self._error(400)
            if not 1 <= seconds <= MAX_TTL:
                return self._error(400)
            token = listener.new_token(seconds)
            self._send(200, token, extra=[("X-aws-ec2-metadata-token-ttl-seconds", str(seconds))])

        def do_HEAD(self):
            self.do_GET()

        def do_POST(self):
            found = self._instance()
            if found is not None:
                self._error(405)

        def do_GET(self):
            found = self._instance()
            if found is None:
                return
            backend, instance, reservation = found
            options = instance.metadata_options
            if options.http_endpoint == "disabled":
                return self._error(403)
            token = self.headers.get("X-aws-ec2-metadata-token")
            if token is not None:
                if not listener.token_valid(token):
                    return self._error(401)
            elif options.http_tokens != "optional":
                return self._error(401)
            path = self.path.split("?", 1)[0]
            parts = [p for p in path.split("/") if p]
            if not parts:
                return self._send(200, "\n".join(VERSIONS + ["latest"]))
            version, rest = parts[0], parts[1:]
            if version != "latest" and version not in VERSIONS:
                return self._error(404)
            user_data = _user_data(instance)
            if not rest:
                top = ["dynamic", "meta-data"] + (["user-data"] if user_data is not None else [])
                return self._send(200, "\n".join(top))
            head, rest = rest[0], rest[1:]
            if head == "user-data" and not rest:
                if user_data is None:
                    return self._error(404)
                return self._send(200, user_data, "application/octet-stream")
            if head == "dynamic":
                tree = {"instance-identity": ({"document": (identity_document(backend, instance), "2009-04-04")}, "2009-04-04")}
            elif head == "meta-data":
                tree = meta_data(backend, instance, reservation, listener)
            else:
                return self._error(404)
            node = _walk(tree, rest, version)
            if node is None:
                return self._error(404)
            if isinstance(node, dict):
                if rest == ["public-keys"]:
                    # The keys are listed by index and name (`0=my-key`), as EC2 lists them.
                    return self._send(200, "0=" + instance.key_name)
                return self._send(200, "\n".join(_listing(node, version)))
            self._send(200, node)

    return Handler


class Registry:
    """The listeners that are open, by instance id."""

    def __init__(self):
        self.lock = threading.Lock()
        self.open = {}

    def listen(self, body):
        """`POST /_admin/metadata`: (status, answer)."""
        instance_id = body.get("instance") if isinstance(body, dict) else None
        if not isinstance(instance_id, str):
            return 400, {"error": "metadata needs instance, an instance id (i-...)"}
        backend, instance, _ = find_instance(instance_id)
        if instance is None:
            return 404, {"error": f"no instance {instance_id}"}
        with self.lock:
            listener = self.open.get(instance_id)
            if listener is None:
                listener = self.open[instance_id] = Listener(instance_id)
        nic0 = instance.nics.get(0)
        return 200, {"port": listener.port, "private_ip": instance.private_ip,
                     "mac": nic0.mac_address if nic0 is not None else None, "hostname": instance.private_dns_name}

    def close_all(self):
        with self.lock:
            listeners, self.open = list(self.open.values()), {}
        for listener in listeners:
            listener.close()


REGISTRY = Registry()
