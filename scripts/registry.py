#!/usr/bin/env python3
"""Serves releases made by scripts/release.sh over HTTPS on 127.0.0.1, the two ways the CLIs install a
provider from the network, so `tofu init` and `terraform init` install the provider as users do:

- the provider registry protocol: service discovery (`/.well-known/terraform.json`, `providers.v1`), the
  versions list, and each platform's download with the SHA256SUMS, their signature and the signing key;
  a CLI configuration's `host "registry.opentofu.org" { services = { "providers.v1" = "<url>/v1/providers/" } }`
  (registry.terraform.io for Terraform) sends `source = "hpc-platform/hpc"` here;
- the provider network mirror protocol under `/mirror/` (`<hostname>/<namespace>/<type>/index.json` and
  `<version>.json`, each archive with its `h1:` and `zh:` hashes), for `provider_installation {
  network_mirror { url = "<url>/mirror/" } }`.

The registry answers with the checksum SHA256SUMS publishes, and the mirror lists an `h1:` hash only for an
archive whose bytes match SHA256SUMS: an archive changed after its release is served as it is, and the CLI
refuses it. With --filesystem-mirror, providers unpacked in a filesystem mirror's layout (hashicorp/local
from scripts/lib.sh ensure_local_provider) are served through the network mirror too, zipped here.

Prints its base URL (`https://127.0.0.1:<port>`) on the first line of stdout once it listens; --port 0 (the
default) takes a free port. Standard library only.
"""

import argparse
import base64
import hashlib
import http.server
import io
import json
import os
import re
import ssl
import sys
import threading
import zipfile

PROVIDER_FILE = re.compile(r"^terraform-provider-(?P<type>[a-z0-9-]+)_(?P<version>[0-9][^_]*)_SHA256SUMS$")
# A zip's time in the filesystem mirror's archives (they are made here, the same on every start).
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


def h1_of(files):
    """The CLIs' `h1:` package hash (Go's dirhash Hash1) of (name, content) pairs: sha256 over the sorted
    lines "<hex sha256 of the file>  <name>\n", base64."""
    lines = []
    for name, data in sorted(files):
        if "\n" in name:
            raise ValueError(f"file name with a newline: {name!r}")
        lines.append(f"{hashlib.sha256(data).hexdigest()}  {name}\n")
    return "h1:" + base64.b64encode(hashlib.sha256("".join(lines).encode()).digest()).decode()


def zip_contents(data):
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return [(i.filename, z.read(i)) for i in z.infolist() if not i.is_dir()]


def key_id_of(armored):
    """The 64-bit key id (hex) of the primary key in an ASCII-armored OpenPGP public key (a v4 key's id is
    the low 8 bytes of its fingerprint, sha1 over 0x99, the body's length and the body)."""
    body, inside = [], False
    for line in armored.splitlines():
        if line.startswith("-----BEGIN"):
            inside = True
        elif line.startswith("-----END") or (inside and line.startswith("=")):
            break
        elif inside and line.strip() and ":" not in line:
            body.append(line.strip())
    data = base64.b64decode("".join(body))
    first = data[0]
    if first & 0x40:  # new packet format
        tag, o = first & 0x3F, data[1]
        if o < 192:
            start, length = 2, o
        elif o < 224:
            start, length = 3, ((o - 192) << 8) + data[2] + 192
        else:
            start, length = 6, int.from_bytes(data[2:6], "big")
    else:  # old format: the length's size is in the low two bits
        tag, size = (first >> 2) & 0x0F, {0: 1, 1: 2, 2: 4}[first & 3]
        start, length = 1 + size, int.from_bytes(data[1 : 1 + size], "big")
    packet = data[start : start + length]
    if tag != 6 or packet[0] != 4:
        raise ValueError("the key file does not start with a version 4 public key")
    return hashlib.sha1(b"\x99" + len(packet).to_bytes(2, "big") + packet).hexdigest()[-16:].upper()


class Release:
    """One version of one provider from release.sh's files: its archives by platform and what the registry
    publishes with them."""

    def __init__(self, directory, sums_name, provider_type, version):
        self.type, self.version = provider_type, version
        prefix = f"terraform-provider-{provider_type}_{version}_"
        self.files = {}  # name served under /releases/ -> path
        self.sums_name = sums_name
        self.sums = {}
        with open(os.path.join(directory, sums_name)) as f:
            for line in f:
                digest, name = line.split()
                self.sums[name.lstrip("*")] = digest
        self.protocols = ["5.0"]  # the registry's default for a release without a manifest
        manifest = prefix + "manifest.json"
        if manifest in self.sums:
            with open(os.path.join(directory, manifest)) as f:
                self.protocols = json.load(f)["metadata"]["protocol_versions"]
        with open(os.path.join(directory, prefix + "signing-key.asc")) as f:
            self.key = f.read()
        self.key_id = key_id_of(self.key)
        for name in [sums_name, sums_name + ".sig", prefix + "signing-key.asc", *self.sums]:
            self.files[name] = os.path.join(directory, name)
            if not os.path.isfile(self.files[name]):
                raise SystemExit(f"registry.py: {name} is missing from {directory}")
        self.archives = {}  # "os_arch" -> (file name, sha256 from SHA256SUMS, mirror hashes)
        for name, digest in sorted(self.sums.items()):
            m = re.fullmatch(re.escape(prefix) + r"(?P<os>[a-z0-9]+)_(?P<arch>[a-z0-9]+)\.zip", name)
            if not m:
                continue
            with open(self.files[name], "rb") as f:
                data = f.read()
            hashes = []
            if hashlib.sha256(data).hexdigest() == digest:
                hashes.append(h1_of(zip_contents(data)))
            else:
                print(f"registry.py: {name} does not match {sums_name}: served as it is, without an h1: hash", file=sys.stderr)
            hashes.append("zh:" + digest)
            self.archives[f"{m['os']}_{m['arch']}"] = (name, digest, hashes)


class Mirrored:
    """A provider version unpacked in a filesystem mirror, zipped here for the network mirror."""

    def __init__(self, platform_dir):
        buf = io.BytesIO()
        files = []
        with zipfile.ZipFile(buf, "w") as z:
            for name in sorted(os.listdir(platform_dir)):
                path = os.path.join(platform_dir, name)
                if not os.path.isfile(path):
                    continue
                with open(path, "rb") as f:
                    data = f.read()
                info = zipfile.ZipInfo(name, date_time=ZIP_EPOCH)
                info.create_system, info.external_attr = 3, (0o100755 & 0xFFFF) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, data)
                files.append((name, data))
        self.data = buf.getvalue()
        self.hashes = [h1_of(files), "zh:" + hashlib.sha256(self.data).hexdigest()]


class Catalogue:
    def __init__(self, release_dir, namespace, filesystem_mirror):
        self.namespace = namespace
        self.releases = {}  # (type, version) -> Release
        for name in sorted(os.listdir(release_dir)):
            m = PROVIDER_FILE.match(name)
            if m:
                self.releases[(m["type"], m["version"])] = Release(release_dir, name, m["type"], m["version"])
        if not self.releases:
            raise SystemExit(f"registry.py: no terraform-provider-*_SHA256SUMS in {release_dir}: run scripts/release.sh first")
        self.files = {n: p for r in self.releases.values() for n, p in r.files.items()}
        self.mirrored = {}  # (hostname, namespace, type) -> {version: {platform: Mirrored}}
        if filesystem_mirror:
            for root, dirs, files in os.walk(filesystem_mirror):
                parts = os.path.relpath(root, filesystem_mirror).split(os.sep)
                if len(parts) == 5 and files:
                    host, ns, ptype, version, platform = parts
                    entry = self.mirrored.setdefault((host, ns, ptype), {}).setdefault(version, {})
                    entry[platform] = Mirrored(root)

    def versions(self, ptype):
        return sorted((r for (t, _), r in self.releases.items() if t == ptype), key=lambda r: r.version)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "hpc-local-registry"

    def send(self, status, body, content_type="application/json"):
        if not isinstance(body, bytes):
            body = json.dumps(body, indent=2).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def not_found(self, what):
        self.send(404, {"errors": [f"Not Found: {what}"]})

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        cat, base = self.server.catalogue, self.server.base_url
        path = self.path.split("?", 1)[0]
        if path == "/.well-known/terraform.json":
            return self.send(200, {"providers.v1": "/v1/providers/"})
        m = re.fullmatch(r"/v1/providers/([^/]+)/([^/]+)/versions", path)
        if m:
            ns, ptype = m.groups()
            releases = cat.versions(ptype) if ns == cat.namespace else []
            if not releases:
                return self.not_found(f"provider {ns}/{ptype}")
            return self.send(200, {"versions": [{
                "version": r.version,
                "protocols": r.protocols,
                "platforms": [{"os": p.split("_")[0], "arch": p.split("_", 1)[1]} for p in sorted(r.archives)],
            } for r in releases]})
        m = re.fullmatch(r"/v1/providers/([^/]+)/([^/]+)/([^/]+)/download/([^/]+)/([^/]+)", path)
        if m:
            ns, ptype, version, os_, arch = m.groups()
            r = cat.releases.get((ptype, version)) if ns == cat.namespace else None
            if r is None or f"{os_}_{arch}" not in r.archives:
                return self.not_found(f"{ns}/{ptype} {version} for {os_}_{arch}")
            name, digest, _ = r.archives[f"{os_}_{arch}"]
            return self.send(200, {
                "protocols": r.protocols,
                "os": os_,
                "arch": arch,
                "filename": name,
                "download_url": f"{base}/releases/{name}",
                "shasums_url": f"{base}/releases/{r.sums_name}",
                "shasums_signature_url": f"{base}/releases/{r.sums_name}.sig",
                "shasum": digest,
                "signing_keys": {"gpg_public_keys": [{
                    "key_id": r.key_id,
                    "ascii_armor": r.key,
                    "trust_signature": "",
                    "source": "",
                    "source_url": None,
                }]},
            })
        m = re.fullmatch(r"/mirror/([^/]+)/([^/]+)/([^/]+)/(index|[^/]+)\.json", path)
        if m:
            host, ns, ptype, leaf = m.groups()
            if ns == cat.namespace and cat.versions(ptype):
                if leaf == "index":
                    return self.send(200, {"versions": {r.version: {} for r in cat.versions(ptype)}})
                r = cat.releases.get((ptype, leaf))
                if r is None:
                    return self.not_found(f"{ns}/{ptype} {leaf}")
                return self.send(200, {"archives": {p: {"url": f"{base}/releases/{name}", "hashes": hashes}
                                                    for p, (name, _, hashes) in sorted(r.archives.items())}})
            versions = cat.mirrored.get((host, ns, ptype))
            if versions is None:
                return self.not_found(f"{host}/{ns}/{ptype}")
            if leaf == "index":
                return self.send(200, {"versions": {v: {} for v in sorted(versions)}})
            if leaf not in versions:
                return self.not_found(f"{host}/{ns}/{ptype} {leaf}")
            return self.send(200, {"archives": {
                p: {"url": f"{base}/mirror-archives/{host}/{ns}/{ptype}/{leaf}/{p}.zip", "hashes": a.hashes}
                for p, a in sorted(versions[leaf].items())}})
        m = re.fullmatch(r"/mirror-archives/([^/]+)/([^/]+)/([^/]+)/([^/]+)/([^/]+)\.zip", path)
        if m:
            host, ns, ptype, version, platform = m.groups()
            archive = cat.mirrored.get((host, ns, ptype), {}).get(version, {}).get(platform)
            if archive is None:
                return self.not_found(path)
            return self.send(200, archive.data, "application/zip")
        m = re.fullmatch(r"/releases/([^/]+)", path)
        if m and m[1] in cat.files:
            # Read on every request: what is on disk now is what is served.
            with open(cat.files[m[1]], "rb") as f:
                data = f.read()
            return self.send(200, data, "application/zip" if m[1].endswith(".zip") else "application/octet-stream")
        return self.not_found(path)

    def log_request(self, code="-", size="-"):
        # Only what went wrong: a request the CLI made that this registry cannot answer.
        if isinstance(code, int) and code >= 400 or str(code).startswith(("4", "5")):
            super().log_request(code, size)

    def log_message(self, fmt, *args):
        print(f"registry.py: {self.address_string()} {fmt % args}", file=sys.stderr, flush=True)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, context, catalogue):
        super().__init__(address, Handler)
        self.context, self.catalogue = context, catalogue
        self.base_url = f"https://{address[0]}:{self.server_address[1]}"

    def get_request(self):
        sock, addr = super().get_request()
        # The TLS handshake runs in the request's thread (on its first read), not in the accepting one.
        return self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    def finish_request(self, request, client_address):
        try:
            request.do_handshake()
        except (ssl.SSLError, OSError) as e:
            # A client that does not trust the certificate says so by closing: worth a line, not a traceback.
            print(f"registry.py: TLS handshake with {client_address[0]}:{client_address[1]} failed: {e}", file=sys.stderr, flush=True)
            return
        super().finish_request(request, client_address)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("release_dir", help="the directory scripts/release.sh wrote (./dist by default)")
    parser.add_argument("--cert", required=True, help="PEM certificate for 127.0.0.1 (its chain, if any, after it)")
    parser.add_argument("--key", required=True, help="PEM private key of --cert")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0, the default: a free one)")
    parser.add_argument("--namespace", default="hpc-platform", help="the providers' registry namespace")
    parser.add_argument("--filesystem-mirror", help="also serve the providers unpacked in this filesystem mirror")
    parser.add_argument("--exit-with-stdin", action="store_true", help="exit when stdin closes (its parent went away)")
    args = parser.parse_args()

    catalogue = Catalogue(args.release_dir, args.namespace, args.filesystem_mirror)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(args.cert, args.key)
    server = Server(("127.0.0.1", args.port), context, catalogue)
    print(server.base_url, flush=True)
    if args.exit_with_stdin:
        def wait_for_eof():
            sys.stdin.buffer.read()
            os._exit(0)
        threading.Thread(target=wait_for_eof, daemon=True).start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
