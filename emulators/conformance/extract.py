#!/usr/bin/env python3
"""Extracts the clouds' API definitions from the vendors' own PyPI packages into one normalized JSON file,
which the emulators' conformance validator reads to judge every request an emulator receives and every
response it sends.

    python extract.py OUT.json [--indent N]    # writes OUT.json
    python extract.py --check [OUT.json]       # extracts, asserts known facts, and writes OUT.json if given

Run it in a virtualenv made from requirements.txt (next to this file). Nothing here is a copy of a vendor's
definitions: every operation and schema is loaded from the installed packages at run time (Google's discovery
documents and the Lustre GAPIC package, Azure's TypeSpec-generated SDKs, OCI's SDK and, when botocore is
installed, botocore's service models), so upgrading a pin and re-running is how the definitions move on.

Output (keys sorted, so a run is deterministic):

    {"generated_by": "emulators/conformance/extract.py",
     "packages": {DIST: VERSION},
     "clouds": {CLOUD: {"operations": [OP], "schemas": {NAME: NODE}}}}

OP is {"id", "service", "version", "method", "path", "query", "request", "response", "long_running", "doc"};
NODE is a small JSON-Schema subset: type|ref, properties, additional, items, required, required_for, readOnly,
enum, enum_strict, format, discriminator, description. See README.md in this directory.
"""

import argparse
import ast
import enum
import functools
import gc
import importlib
import inspect
import json
import os
import pkgutil
import re
import sys
import time
import typing
from importlib import metadata

GENERATED_BY = "emulators/conformance/extract.py"
DESC_LIMIT = 400

DISTRIBUTIONS = [
    "google-api-python-client",
    "google-cloud-lustre",
    "google-api-core",
    "googleapis-common-protos",
    "proto-plus",
    "protobuf",
    "azure-core",
    "azure-mgmt-core",
    "azure-mgmt-compute",
    "azure-mgmt-network",
    "azure-mgmt-resource",
    "azure-mgmt-storagecache",
    "azure-mgmt-containerservice",
    "azure-mgmt-keyvault",
    "azure-keyvault-secrets",
    "oci",
    "botocore",
]


# --------------------------------------------------------------------------------------------------------------
# Shared helpers


def clean_doc(text):
    """The first DESC_LIMIT characters of a documentation text, its whitespace collapsed; None when empty."""
    if not text:
        return None
    text = " ".join(str(text).split())
    return text[:DESC_LIMIT] if text else None


def with_doc(node, text):
    doc = clean_doc(text)
    if doc:
        node["description"] = doc
    return node


def pascal(snake):
    return "".join(part[:1].upper() + part[1:] for part in snake.split("_") if part)


@functools.lru_cache(maxsize=None)
def parse_file(path):
    with open(path, encoding="utf-8") as f:
        return ast.parse(f.read(), filename=path)


def const(node):
    """The value of a constant expression (str, number, list/tuple/dict of constants), else None."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


@functools.lru_cache(maxsize=None)
def walk(tree):
    """Every node under `tree` (itself first) in source order, as a tuple computed once per node: the SDK
    sources are walked many times, and ast.walk is slow on the largest of them."""
    out, stack = [], [tree]
    AST = ast.AST
    while stack:
        node = stack.pop()
        out.append(node)
        children = []
        for field in node._fields:
            v = getattr(node, field, None)
            if isinstance(v, list):
                children.extend(x for x in v if isinstance(x, AST))
            elif isinstance(v, AST):
                children.append(v)
        stack.extend(reversed(children))
    return tuple(out)


@functools.lru_cache(maxsize=None)
def calls(tree):
    return tuple(node for node in walk(tree) if isinstance(node, ast.Call))


def call_name(call):
    f = call.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return None


def kwarg(call, name):
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def dist_versions():
    out = {}
    for dist in DISTRIBUTIONS:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def sort_ops(ops):
    return sorted(ops, key=lambda o: (o["service"], o["version"], o["id"], o["path"], o["method"]))


# --------------------------------------------------------------------------------------------------------------
# GCP: discovery documents (Compute v1 and beta, Service Networking v1, Resource Manager v3, GKE's container v1)

GCP_READ_ONLY = re.compile(r"^\s*(?:\[Output Only\]|Output only\.)", re.IGNORECASE)


def discovery_path(name):
    import googleapiclient

    return os.path.join(os.path.dirname(googleapiclient.__file__), "discovery_cache", "documents", name)


def load_discovery(name):
    with open(discovery_path(name), encoding="utf-8") as f:
        return json.load(f)


def gcp_node(s, ns):
    if "$ref" in s:
        return {"ref": f"{ns}/{s['$ref']}"}
    t = s.get("type", "any")
    n = {"type": t}
    if "format" in s:
        n["format"] = s["format"]
    if "enum" in s:
        n["enum"] = list(s["enum"])
        n["enum_strict"] = True
    if t == "array":
        n["items"] = gcp_node(s.get("items", {}), ns)
    elif t == "object":
        props = s.get("properties") or {}
        if props:
            n["properties"] = {k: gcp_property(v, ns) for k, v in props.items()}
            required_for = {
                k: sorted(v["annotations"]["required"])
                for k, v in props.items()
                if (v.get("annotations") or {}).get("required")
            }
            if required_for:
                n["required_for"] = required_for
            required = sorted(k for k, v in props.items() if v.get("required") is True)
            if required:
                n["required"] = required
        extra = s.get("additionalProperties")
        if isinstance(extra, dict):
            n["additional"] = gcp_node(extra, ns)
    return n


def gcp_property(v, ns):
    n = gcp_node(v, ns)
    if v.get("readOnly") or GCP_READ_ONLY.match(v.get("description") or ""):
        n["readOnly"] = True
    return with_doc(n, v.get("description"))


def gcp_discovery(doc_name, ns, lro_kind):
    """Operations and schemas of one discovery document. `ns` namespaces the schemas ("compute.v1")."""
    d = load_discovery(doc_name)
    service, version = d["name"], d["version"]
    service_path = d.get("servicePath") or ""
    system_query = sorted(d.get("parameters") or {})
    ops = []

    def visit(resources):
        for rname, r in resources.items():
            for m in (r.get("methods") or {}).values():
                flat = m.get("flatPath") or re.sub(r"\{\+(\w+)\}", r"{\1}", m["path"])
                query = {k for k, p in (m.get("parameters") or {}).items() if p.get("location") == "query"}
                response = (m.get("response") or {}).get("$ref")
                request = (m.get("request") or {}).get("$ref")
                long_running = None
                # An Operation from a create/update/delete is a long-running one; the operations'
                # own resources (zoneOperations, operations, ...) return it only to poll it.
                if response == "Operation" and not rname.lower().endswith("operations"):
                    long_running = {"kind": lro_kind}
                ops.append(
                    {
                        "id": m["id"],
                        "service": service,
                        "version": version,
                        "method": m["httpMethod"],
                        "path": "/" + service_path + flat,
                        "query": sorted(query | set(system_query)),
                        "request": f"{ns}/{request}" if request else None,
                        "response": f"{ns}/{response}" if response else None,
                        "long_running": long_running,
                        "doc": d.get("documentationLink"),
                        # The interface version the method is at ($apiVersion / X-Goog-Api-Version).
                        "interface_version": m.get("apiVersion"),
                    }
                )
            visit(r.get("resources") or {})

    visit(d.get("resources") or {})
    schemas = {}
    for name, s in d.get("schemas", {}).items():
        schemas[f"{ns}/{name}"] = with_doc(gcp_node(s, ns), s.get("description"))
    return ops, schemas, system_query


# --------------------------------------------------------------------------------------------------------------
# GCP: Managed Lustre (GAPIC package: proto-plus messages and the REST transport's HTTP bindings)

PROTO_NS = {
    "google.cloud.lustre.v1": "lustre.v1",
    "google.longrunning": "longrunning",
    "google.rpc": "rpc",
    "google.cloud.location": "location",
    "google.iam.v1": "iam.v1",
    "google.type": "type",
}

# The proto3 JSON mapping of the well-known types (https://protobuf.dev/programming-guides/json/).
PROTO_WKT = {
    "google.protobuf.Timestamp": {"type": "string", "format": "date-time"},
    "google.protobuf.Duration": {"type": "string", "format": "google-duration"},
    "google.protobuf.FieldMask": {"type": "string", "format": "google-fieldmask"},
    "google.protobuf.Struct": {"type": "object", "additional": {"type": "any"}},
    "google.protobuf.Value": {"type": "any"},
    "google.protobuf.ListValue": {"type": "array", "items": {"type": "any"}},
    "google.protobuf.Any": {"type": "any"},
    "google.protobuf.Empty": {"type": "object"},
    "google.protobuf.DoubleValue": {"type": "number", "format": "double"},
    "google.protobuf.FloatValue": {"type": "number", "format": "float"},
    "google.protobuf.Int64Value": {"type": "string", "format": "int64"},
    "google.protobuf.UInt64Value": {"type": "string", "format": "uint64"},
    "google.protobuf.Int32Value": {"type": "integer", "format": "int32"},
    "google.protobuf.UInt32Value": {"type": "integer", "format": "uint32"},
    "google.protobuf.BoolValue": {"type": "boolean"},
    "google.protobuf.StringValue": {"type": "string"},
    "google.protobuf.BytesValue": {"type": "string", "format": "byte"},
}

# FieldDescriptor.TYPE_* -> JSON node (proto3 JSON: 64-bit integers are strings, bytes base64).
PROTO_SCALARS = {
    1: {"type": "number", "format": "double"},
    2: {"type": "number", "format": "float"},
    3: {"type": "string", "format": "int64"},
    4: {"type": "string", "format": "uint64"},
    5: {"type": "integer", "format": "int32"},
    6: {"type": "string", "format": "uint64"},
    7: {"type": "integer", "format": "uint32"},
    8: {"type": "boolean"},
    9: {"type": "string"},
    12: {"type": "string", "format": "byte"},
    13: {"type": "integer", "format": "uint32"},
    15: {"type": "integer", "format": "int32"},
    16: {"type": "string", "format": "int64"},
    17: {"type": "integer", "format": "int32"},
    18: {"type": "string", "format": "int64"},
}

BEHAVIOR_PREFIX = re.compile(r"^(Required|Optional|Output only|Immutable|Identifier|Input only|Non-empty Default)\.\s*")
ATTRIBUTE_ENTRY = re.compile(r"^(\w+) \((.*)\):$")
ONEOF_NOTE = re.compile(r"This field is a member of `oneof`_ ``\w+``\.")


def proto_plus_attribute_docs(doc):
    """{field: text} from a proto-plus message's docstring ("Attributes:" then `name (type):` entries)."""
    out = {}
    if not doc:
        return out
    lines = inspect.cleandoc(doc).splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "Attributes:")
    except StopIteration:
        return out
    indent, current, buf = None, None, []

    def flush():
        if current:
            out[current] = ONEOF_NOTE.sub("", " ".join(x for x in buf if x)).strip()

    for line in lines[start + 1 :]:
        if not line.strip():
            continue
        ind = len(line) - len(line.lstrip())
        m = ATTRIBUTE_ENTRY.match(line.strip())
        if m and (indent is None or ind == indent):
            flush()
            indent, current, buf = ind, m.group(1), []
        elif indent is not None and ind <= indent:
            break
        else:
            buf.append(line.strip())
    flush()
    return out


def field_behaviors(field, doc):
    """google.api.field_behavior of a field: from its options when the descriptor carries them, else from the
    documented prefixes ("Required. Immutable. ..."), which the generator writes from the same annotation.
    (proto-plus builds its descriptors without field options, so for Lustre the docs are what there is.)"""
    found = set()
    try:
        from google.api import field_behavior_pb2

        opts = field.GetOptions()
        for b in opts.Extensions[field_behavior_pb2.field_behavior]:
            found.add(field_behavior_pb2.FieldBehavior.Name(b))
    except Exception:  # noqa: BLE001 - no options, or an older protobuf
        pass
    if not found and doc:
        rest = doc
        while True:
            m = BEHAVIOR_PREFIX.match(rest)
            if not m:
                break
            found.add(m.group(1).upper().replace(" ", "_").replace("-", "_"))
            rest = rest[m.end() :]
    return found


def is_repeated(field):
    flag = getattr(field, "is_repeated", None)
    if flag is not None:
        return bool(flag() if callable(flag) else flag)
    return field.label == field.LABEL_REPEATED


def is_map(field):
    return field.message_type is not None and field.message_type.GetOptions().map_entry


def proto_descriptor(cls):
    pb = getattr(cls, "pb", None)
    if callable(pb):
        return pb().DESCRIPTOR
    return cls.DESCRIPTOR


class ProtoSchemas:
    """Converts message descriptors (and those they reach) to named NODEs."""

    def __init__(self, schemas):
        self.schemas = schemas
        self.docs = {}  # message full name -> {field name: doc}
        self.message_docs = {}  # message full name -> doc
        self.required = {}  # schema name -> JSON names of its REQUIRED fields (see required_for_methods)

    def register_proto_plus(self, cls):
        desc = proto_descriptor(cls)
        self.docs[desc.full_name] = proto_plus_attribute_docs(cls.__doc__)
        self.message_docs[desc.full_name] = (cls.__doc__ or "").split("\n\n")[0]
        for v in vars(cls).values():
            if inspect.isclass(v) and hasattr(v, "pb") and hasattr(v, "meta"):
                self.register_proto_plus(v)

    def name(self, desc):
        pkg = desc.file.package
        ns = PROTO_NS.get(pkg) or re.sub(r"^google\.(cloud\.)?", "", pkg)
        return f"{ns}/{desc.full_name[len(pkg) + 1:] if pkg else desc.full_name}"

    def ref(self, desc):
        if desc.full_name in PROTO_WKT:
            return dict(PROTO_WKT[desc.full_name])
        name = self.name(desc)
        if name not in self.schemas:
            self.schemas[name] = {}  # placeholder against recursion
            self.schemas[name], required = self.message(desc)
            if required:
                self.required[name] = required
        return {"ref": name}

    def value(self, field):
        if field.type == 14:  # enum
            return {"type": "string", "enum": [v.name for v in field.enum_type.values], "enum_strict": True}
        if field.type in (10, 11):  # group, message
            return self.ref(field.message_type)
        return dict(PROTO_SCALARS[field.type])

    def message(self, desc):
        docs = self.docs.get(desc.full_name, {})
        props, required = {}, []
        for f in desc.fields:
            if is_map(f):
                node = {"type": "object", "additional": self.value(f.message_type.fields_by_name["value"])}
            elif is_repeated(f):
                node = {"type": "array", "items": self.value(f)}
            else:
                node = self.value(f)
            doc = docs.get(f.name)
            behaviors = field_behaviors(f, doc)
            if "OUTPUT_ONLY" in behaviors:
                node["readOnly"] = True
            if "REQUIRED" in behaviors:
                required.append(f.json_name)
            props[f.json_name] = with_doc(node, doc)
        node = {"type": "object", "properties": props}
        return with_doc(node, self.message_docs.get(desc.full_name)), sorted(required)

    def required_for_methods(self, ops):
        """REQUIRED is a create-time rule: an Update with an update mask sends only what it changes, and a
        field bound to the path (`name` in a `body: "*"` request) is not in the body. So a REQUIRED field
        becomes `required_for` every method but PATCH whose request body reaches its message, as Compute's
        discovery document writes it."""

        def reach(name, seen):
            if name in seen:
                return
            seen.add(name)
            stack = [self.schemas[name]]
            while stack:
                n = stack.pop()
                if "ref" in n:
                    reach(n["ref"], seen)
                stack.extend(n[k] for k in ("items", "additional") if k in n)
                stack.extend((n.get("properties") or {}).values())

        for op in ops:
            bound = op.pop("_bound")
            if not op["request"] or op["method"] == "PATCH":
                continue
            seen = set()
            reach(op["request"], seen)
            for name in seen:
                for field in self.required.get(name, ()):
                    if name == op["request"] and field in bound:
                        continue
                    self.schemas[name].setdefault("required_for", {}).setdefault(field, []).append(op["id"])
        for node in self.schemas.values():
            for methods in (node.get("required_for") or {}).values():
                methods.sort()


def google_uri(uri):
    """`/v1/{parent=projects/*/locations/*}/instances` -> (`/v1/projects/{projectsId}/locations/{locationsId}/instances`,
    ["parent"]): one `{name}` per segment, named as Google's discovery documents name them."""
    bound, used = [], set()

    def var(base):
        name, i = base + "Id", 1
        while name in used:
            name, i = f"{base}Id{i}", i + 1
        used.add(name)
        return "{" + name + "}"

    def expand(m):
        field, pattern = m.group(1), m.group(2)
        bound.append(field)
        if pattern is None:
            return "{" + field.split(".")[-1] + "}"
        out, prev = [], field.split(".")[-1]
        for seg in pattern.split("/"):
            if seg in ("*", "**"):
                out.append(var(prev))
            else:
                out.append(seg)
                prev = seg
        return "/".join(out)

    return re.sub(r"\{([\w.]+)(?:=([^}]*))?\}", expand, uri), bound


def google_method_id(service, path, rpc):
    """Discovery-style method id, as Google's REST reference names the method:
    `/v1/projects/{projectsId}/locations/{locationsId}/instances` + CreateInstance ->
    `lustre.projects.locations.instances.create`; a custom method's verb comes from its `:verb`."""
    path, _, verb = path.partition(":")
    collections = [s for s in path.split("/")[2:] if s and not s.startswith("{")]
    if not verb:
        standard = (("Get", "get"), ("List", "list"), ("Create", "create"), ("Delete", "delete"), ("Update", "patch"))
        verb = next((v for prefix, v in standard if rpc.startswith(prefix)), rpc[:1].lower() + rpc[1:])
    return ".".join([service] + collections + [verb])


def query_fields(desc, exclude, prefix="", depth=0):
    out = []
    for f in desc.fields:
        if f.name in exclude:
            continue
        name = prefix + f.json_name
        if f.type == 11 and not is_repeated(f) and f.message_type.full_name not in PROTO_WKT and depth < 3:
            out.extend(query_fields(f.message_type, (), name + ".", depth + 1))
        else:
            out.append(name)
    return out


def gcp_lustre(system_query):
    import proto
    from google.cloud.lustre_v1 import types as lustre_types
    from google.cloud.lustre_v1.services.lustre.transports import rest as lustre_rest
    from google.cloud.lustre_v1.services.lustre.transports import rest_base as lustre_rest_base

    schemas = {}
    conv = ProtoSchemas(schemas)
    messages = []
    for mod in pkgutil.iter_modules(lustre_types.__path__):
        module = importlib.import_module(f"{lustre_types.__name__}.{mod.name}")
        for v in vars(module).values():
            if inspect.isclass(v) and issubclass(v, proto.Message) and v.__module__ == module.__name__:
                conv.register_proto_plus(v)  # the field docs first: they carry the field behaviors
                messages.append(v)
    # Every message of the package, whether an operation reaches it or not, and the long-running Operation.
    for v in messages:
        conv.ref(proto_descriptor(v))
    from google.longrunning import operations_pb2

    conv.ref(operations_pb2.Operation.DESCRIPTOR)

    transport = lustre_rest.LustreRestTransport
    base = lustre_rest_base._BaseLustreRestTransport
    ops = []
    for attr, cls in vars(transport).items():
        if not (attr.startswith("_") and inspect.isclass(cls)):
            continue
        rpc = attr[1:]
        bcls = getattr(base, "_Base" + rpc, None)
        if bcls is None or not hasattr(bcls, "_get_http_options"):
            continue
        hints = typing.get_type_hints(cls.__call__)
        req_desc = proto_descriptor(hints["request"])
        resp_cls = hints.get("return")
        resp_desc = None if resp_cls in (None, type(None)) else proto_descriptor(resp_cls)
        for opt in bcls._get_http_options():
            path, bound = google_uri(opt["uri"])
            body = opt.get("body")
            bound_json = set()
            if body == "*":
                request = conv.ref(req_desc)["ref"]
                query = []
                bound_json = {req_desc.fields_by_name[b.split(".")[0]].json_name for b in bound}
            else:
                if body:
                    f = req_desc.fields_by_name[body]
                    node = conv.value(f)
                    request = node.get("ref")
                else:
                    request = None
                query = query_fields(req_desc, {b.split(".")[0] for b in bound} | ({body} if body else set()))
            response = None
            if resp_desc is not None:
                node = conv.ref(resp_desc)
                response = node.get("ref")
            op_id = google_method_id("lustre", path, rpc)
            lro = None
            if resp_desc is not None and resp_desc.full_name == "google.longrunning.Operation" and ".operations." not in op_id:
                lro = {"kind": "google-longrunning"}
            ops.append(
                {
                    "id": op_id,
                    "service": "lustre",
                    "version": path.split("/")[1],
                    "method": opt["method"].upper(),
                    "path": path,
                    "query": sorted(set(query) | set(system_query)),
                    "request": request,
                    "response": response,
                    "long_running": lro,
                    "doc": None,
                    "_bound": bound_json,
                }
            )
    conv.required_for_methods(ops)
    # google.protobuf.Empty responses (CancelOperation, DeleteOperation) are written as no response schema.
    return ops, schemas


def gcp():
    ops, schemas = [], {}
    system_query = None
    for doc, ns, kind in (
        ("compute.v1.json", "compute.v1", "gcp-operation"),
        ("compute.beta.json", "compute.beta", "gcp-operation"),
        ("servicenetworking.v1.json", "servicenetworking.v1", "google-longrunning"),
        ("cloudresourcemanager.v3.json", "cloudresourcemanager.v3", "google-longrunning"),
        ("container.v1.json", "container.v1", "gcp-operation"),
        ("secretmanager.v1.json", "secretmanager.v1", "google-longrunning"),
    ):
        o, s, sq = gcp_discovery(doc, ns, kind)
        ops += o
        schemas.update(s)
        if ns == "servicenetworking.v1":
            system_query = sq  # Google's standard system parameters (alt, fields, prettyPrint, ...)
    o, s = gcp_lustre(system_query or [])
    ops += o
    schemas.update(s)
    return {"operations": sort_ops(ops), "schemas": schemas}


# --------------------------------------------------------------------------------------------------------------
# Azure: TypeSpec-generated SDKs (models: rest_field; operations: build_*_request and the operation classes)

AZURE_PACKAGES = [
    ("compute", "azure.mgmt.compute"),
    ("keyvault", "azure.mgmt.keyvault"),
    # Key Vault's data plane (`{vaultBaseUrl}/secrets/...`): the generated client inside azure-keyvault-secrets,
    # whose operations module sits at `_operations` rather than `operations`.
    ("keyvaultsecrets", "azure.keyvault.secrets._generated", "._operations._operations"),
    ("network", "azure.mgmt.network"),
    ("resource", "azure.mgmt.resource.resources"),
    ("storagecache", "azure.mgmt.storagecache"),
    ("containerservice", "azure.mgmt.containerservice"),
]

AZURE_FORMATS = {"rfc3339": "date-time", "rfc7231": "date-time-rfc7231", "unix-timestamp": "unixtime"}


class AzurePackage:
    def __init__(self, svc, pkg, ops=".operations._operations"):
        self.svc, self.pkg, self.ns = svc, pkg, f"azure.{svc}"
        self.models = importlib.import_module(pkg + ".models")
        self.models_impl = importlib.import_module(pkg + ".models._models")
        self.model_base = importlib.import_module(pkg + "._utils.model_base")
        self.ops_module = importlib.import_module(pkg + ops)
        self.globalns = dict(vars(self.models_impl))
        self.globalns["_models"] = self.models
        self.schemas = {}
        self.field_docs = self._field_docs(inspect.getsourcefile(self.models_impl))

    # ---- models

    @staticmethod
    def _field_docs(path):
        """{(class, attr): docstring} from the string literal after each field's assignment."""
        out = {}
        for cls in parse_file(path).body:
            if not isinstance(cls, ast.ClassDef):
                continue
            body = cls.body
            for stmt, nxt in zip(body, body[1:]):
                if isinstance(stmt, (ast.AnnAssign, ast.Assign)) and isinstance(nxt, ast.Expr):
                    doc = const(nxt.value)
                    target = stmt.target if isinstance(stmt, ast.AnnAssign) else stmt.targets[0]
                    if isinstance(doc, str) and isinstance(target, ast.Name):
                        out[(cls.name, target.id)] = doc
        return out

    def is_model(self, tp):
        # (not issubclass: Model is a MutableMapping ABC, and ABC subclass checks are slow by the thousand)
        return inspect.isclass(tp) and tp is not self.model_base.Model and self.model_base.Model in tp.__mro__

    def type_node(self, tp, fmt=None):
        import datetime

        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin is typing.Union:
            members = [a for a in args if a is not type(None)]
            if len(members) == 1:
                return self.type_node(members[0], fmt)
            enums = [a for a in members if inspect.isclass(a) and issubclass(a, enum.Enum)]
            if str in members and enums and len(enums) + 1 == len(members):
                values = [e.value for en in enums for e in en]
                return {"type": "string", "enum": values, "enum_strict": False}
            return {"type": "any"}
        if origin is typing.Literal:
            values = [a.value if isinstance(a, enum.Enum) else a for a in args]
            kind = {str: "string", bool: "boolean", int: "integer", float: "number"}.get(type(values[0]), "any")
            return {"type": kind, "enum": values, "enum_strict": True}
        if origin in (list, typing.List, tuple) or (origin is not None and origin.__name__ in ("Sequence", "List")):
            return {"type": "array", "items": self.type_node(args[0] if args else typing.Any, fmt)}
        if origin in (dict, typing.Dict) or (origin is not None and origin.__name__ in ("Mapping", "MutableMapping")):
            return {"type": "object", "additional": self.type_node(args[1] if len(args) > 1 else typing.Any, fmt)}
        if tp is typing.Any or tp is object:
            return {"type": "any"}
        if tp is bool:
            return {"type": "boolean"}
        if tp is int:
            return {"type": "integer"}
        if tp is float:
            return {"type": "number"}
        if tp is str:
            return {"type": "string"}
        if tp is bytes:
            return {"type": "string", "format": "base64url" if fmt == "base64url" else "byte"}
        if tp is datetime.datetime:
            f = AZURE_FORMATS.get(fmt or "rfc3339", fmt)
            return {"type": "integer" if f == "unixtime" else "string", "format": f}
        if tp is datetime.date:
            return {"type": "string", "format": "date"}
        if tp is datetime.time:
            return {"type": "string", "format": "time"}
        if tp is datetime.timedelta:
            return {"type": "string", "format": "duration"}
        if inspect.isclass(tp) and issubclass(tp, enum.Enum):
            return {"type": "string", "enum": [e.value for e in tp], "enum_strict": True}
        if self.is_model(tp):
            return {"ref": self.model_ref(tp)}
        return {"type": "any"}

    def model_ref(self, cls):
        name = f"{self.ns}/{cls.__name__}"
        if name not in self.schemas:
            self.schemas[name] = {}
            self.schemas[name] = self.model_schema(cls)
        return name

    def model_schema(self, cls):
        RestField = self.model_base._RestField
        fields = {}
        for k in reversed(cls.__mro__):
            if not self.is_model(k):
                continue
            for attr, v in vars(k).items():
                if attr[0] != "_" and isinstance(v, RestField):
                    fields[attr] = (v, k)
        try:
            hints = typing.get_type_hints(cls, globalns=self.globalns)
        except Exception:  # noqa: BLE001 - resolve one by one below
            hints = {}
        props, required = {}, []
        discriminator = None
        for attr, (rf, definer) in fields.items():
            tp = hints.get(attr)
            if tp is None:
                ann = definer.__dict__.get("__annotations__", {}).get(attr)
                try:
                    tp = eval(ann, self.globalns) if isinstance(ann, str) else ann  # noqa: S307 - the SDK's own annotation
                except Exception:  # noqa: BLE001
                    tp = typing.Any
            json_name = rf._rest_name_input or attr
            node = self.type_node(tp, rf._format)
            optional = typing.get_origin(tp) is typing.Union and type(None) in typing.get_args(tp)
            if not optional:
                required.append(json_name)
            if rf._visibility == ["read"]:
                node["readOnly"] = True
            props[json_name] = with_doc(node, self.field_docs.get((definer.__name__, attr)))
            if rf._is_discriminator and definer is cls and "__mapping__" in vars(cls):
                discriminator = json_name
        node = {"type": "object", "properties": props}
        if required:
            node["required"] = sorted(required)
        if discriminator and cls.__mapping__:
            node["discriminator"] = {
                "field": discriminator,
                "mapping": {k: self.model_ref(v) for k, v in sorted(cls.__mapping__.items())},
            }
        return with_doc(node, (cls.__doc__ or "").split("\n\n")[0])

    def all_models(self):
        for v in list(vars(self.models_impl).values()) + list(vars(self.models).values()):
            if self.is_model(v) and v.__module__.startswith(self.pkg):
                self.model_ref(v)

    # ---- operations

    def config_api_version(self):
        tree = parse_file(inspect.getsourcefile(importlib.import_module(self.pkg + "._configuration")))
        for c in calls(tree):
            if call_name(c) == "pop" and len(c.args) == 2 and const(c.args[0]) == "api_version":
                return const(c.args[1])
        return None

    @staticmethod
    def _api_version_default(fn):
        for c in calls(fn):
            if call_name(c) == "pop" and len(c.args) == 2 and const(c.args[0]) == "api-version":
                return const(c.args[1])
        return None

    def builds(self, tree):
        out = {}
        for fn in tree.body:
            if not (isinstance(fn, ast.FunctionDef) and fn.name.startswith("build_")):
                continue
            url = method = None
            query = set()
            for node in walk(fn):
                if isinstance(node, (ast.Assign, ast.AnnAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for t in targets:
                        if isinstance(t, ast.Name) and t.id == "_url" and isinstance(const(node.value), str):
                            url = const(node.value)
                        if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == "_params":
                            key = const(t.slice)
                            if isinstance(key, str):
                                query.add(key)
                if isinstance(node, ast.Call) and call_name(node) == "HttpRequest":
                    m = kwarg(node, "method")
                    method = const(m) if m is not None else const(node.args[0]) if node.args else None
            out[fn.name] = {"url": url, "method": method, "api_version": self._api_version_default(fn), "query": query}
        return out

    def eval_annotation(self, node):
        try:
            return eval(ast.unparse(node), vars(self.ops_module))  # noqa: S307 - the SDK's own annotation
        except Exception:  # noqa: BLE001
            return None

    def body_type(self, tp):
        """The model of a body parameter annotated Union[_models.X, JSON, IO[bytes]] (or with the TypedDict
        `_types.X` in place of JSON)."""
        if tp is None:
            return None
        members = typing.get_args(tp) if typing.get_origin(tp) is typing.Union else (tp,)
        keep = []
        for m in members:
            o = typing.get_origin(m)
            if m in (bytes, type(None)) or (o is not None and getattr(o, "__name__", "") in ("MutableMapping", "IO")):
                continue
            if inspect.isclass(m) and m.__name__ == "IO" or self.typed_dict(m):
                continue  # IO, or a TypedDict: the same body as plain JSON
            keep.append(m)
        return keep[0] if len(keep) == 1 else None

    def typed_dict(self, tp):
        if inspect.isclass(tp) and typing.get_origin(tp) is None:
            return dict in tp.__mro__ and not self.is_model(tp)
        return any(self.typed_dict(a) for a in typing.get_args(tp))

    def named(self, node, synthetic):
        """A schema name for an operation's body: the model's, or a synthetic schema holding `node`."""
        if node is None:
            return None
        if set(node) == {"ref"}:
            return node["ref"]
        name = f"{self.ns}/{synthetic}"
        self.schemas[name] = node
        return name

    def operations(self):
        tree = parse_file(inspect.getsourcefile(self.ops_module))
        builds = self.builds(tree)
        config_version = self.config_api_version()
        ops = []
        for cls in tree.body:
            if not (isinstance(cls, ast.ClassDef) and cls.name.endswith(("Operations", "OperationsMixin"))):
                continue
            # VirtualMachineScaleSetsOperations -> VirtualMachineScaleSets_*; the provider's own Operations
            # class -> Operations_List; a client mixin's methods go ungrouped, as their operationIds do.
            group = (cls.name[: -len("Operations")] or "Operations") if cls.name.endswith("Operations") else None
            methods = {}
            for fn in cls.body:
                if isinstance(fn, ast.FunctionDef):
                    if any(isinstance(d, ast.Name) and d.id == "overload" for d in fn.decorator_list):
                        continue
                    methods[fn.name] = fn
            for name, fn in methods.items():
                if name.startswith("_"):
                    continue
                op = self.operation(fn, methods, builds, config_version)
                if op is None:
                    continue
                verb = pascal(name[len("begin_") :] if name.startswith("begin_") else name)
                op["id"] = f"{group}_{verb}" if group else verb
                op["request"] = self.named(op.pop("_request"), f"{op['id']}#request")
                op["response"] = self.named(op.pop("_response"), f"{op['id']}#response")
                ops.append(op)
        return ops

    def operation(self, fn, methods, builds, config_version):
        def build_calls(f):
            return [c for c in calls(f) if isinstance(c.func, ast.Name) and c.func.id in builds]

        # A long-running operation's request goes out from its _<op>_initial method (a paged one's begin_
        # method builds requests for the next pages as well).
        initial = None
        for c in calls(fn):
            n = call_name(c)
            if n and n.startswith("_") and n.endswith("_initial") and n in methods:
                initial = methods[n]
                break
        found = build_calls(initial if initial is not None else fn)
        if not found:
            return None
        build_call = found[0]
        build = builds[build_call.func.id]
        scopes = [fn] + ([initial] if initial else [])

        version = None
        for f in scopes:
            version = version or self._api_version_default(f)
        if version is None:
            api_arg = kwarg(build_call, "api_version")
            if api_arg is not None and ast.unparse(api_arg) == "self._config.api_version":
                version = config_version
        # The generic by-id operations (`/{resourceId}`) take the resource provider's api-version from the
        # caller: any version goes, written "*".
        version = version or build["api_version"] or "*"

        # Request body: the parameter json.dumps() serializes.
        request = None
        for f in scopes:
            for c in calls(f):
                if call_name(c) == "dumps" and c.args and isinstance(c.args[0], ast.Name):
                    pname = c.args[0].id
                    args = f.args.args + f.args.kwonlyargs
                    for a in fn.args.args + fn.args.kwonlyargs + args:
                        if a.arg == pname and a.annotation is not None:
                            tp = self.body_type(self.eval_annotation(a.annotation))
                            request = self.type_node(tp) if tp is not None else {"type": "any"}
                            break
                    break
            if request is not None:
                break

        # Response body: what _deserialize() makes of it; a paged list's page when extract_data() exists.
        response = None
        paged = any(isinstance(n, ast.FunctionDef) and n.name == "extract_data" for n in walk(fn))
        for c in calls(fn):
            if call_name(c) == "_deserialize" and isinstance(c.func, ast.Name) and c.args:
                tp = self.eval_annotation(c.args[0])
                if tp is None:
                    continue
                if paged and typing.get_origin(tp) in (list, typing.List):
                    item = self.type_node(typing.get_args(tp)[0])
                    value_key, next_key = "value", "nextLink"
                    if len(c.args) > 1 and isinstance(c.args[1], ast.Call) and c.args[1].args:
                        value_key = const(c.args[1].args[0]) or value_key
                    for n in walk(fn):
                        if isinstance(n, ast.Call) and call_name(n) == "get" and n.args and const(n.args[0]) not in (None, value_key):
                            if isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) and n.func.value.id == "deserialized":
                                next_key = const(n.args[0])
                    item_name = item["ref"].split("/", 1)[1] if "ref" in item else item.get("type", "any")
                    page_name = f"{self.ns}/Page[{item_name}]"
                    if (value_key, next_key) != ("value", "nextLink"):
                        page_name = f"{self.ns}/Page[{item_name}]({value_key},{next_key})"
                    self.schemas[page_name] = {
                        "type": "object",
                        "properties": {
                            value_key: {"type": "array", "items": item},
                            next_key: {"type": "string", "description": "The URL to get the next page of results."},
                        },
                        "required": [value_key],
                    }
                    response = {"ref": page_name}
                else:
                    response = self.type_node(tp)
                break

        long_running = None
        if initial is not None:
            statuses, headers = self.lro_statuses(initial)
            final_state = None
            for c in calls(fn):
                lro = kwarg(c, "lro_options")
                if lro is not None and isinstance(const(lro), dict):
                    final_state = const(lro).get("final-state-via")
            long_running = {"kind": "azure", "statuses": statuses, "headers": headers, "final_state_via": final_state}

        return {
            "service": self.svc,
            "version": version,
            "method": build["method"],
            "path": build["url"],
            "query": sorted(build["query"]),
            "_request": request,
            "_response": response,
            "long_running": long_running,
            "doc": None,
        }

    @staticmethod
    def lro_statuses(fn):
        statuses = []
        for node in walk(fn):
            if (
                isinstance(node, ast.Compare)
                and ast.unparse(node.left) == "response.status_code"
                and isinstance(node.ops[0], ast.NotIn)
                and isinstance(const(node.comparators[0]), list)
            ):
                statuses = sorted(const(node.comparators[0]))
        conditional, headers = set(), {}

        def header_keys(stmts):
            for stmt in stmts:
                for n in walk(stmt):
                    if isinstance(n, ast.Assign):
                        t = n.targets[0]
                        if isinstance(t, ast.Subscript) and ast.unparse(t.value) == "response_headers":
                            yield n, const(t.slice)

        for node in walk(fn):
            if isinstance(node, ast.If) and ast.unparse(node.test).startswith("response.status_code =="):
                status = const(node.test.comparators[0])
                for n, key in header_keys(node.body):
                    conditional.add(id(n))
                    headers.setdefault(str(status), []).append(key)
        for n, key in header_keys(fn.body):
            if id(n) not in conditional:
                for s in statuses:
                    headers.setdefault(str(s), []).append(key)
        return statuses, {k: sorted(set(v)) for k, v in headers.items()}


def azure():
    ops, schemas = [], {}
    for svc, pkg, *module in AZURE_PACKAGES:
        p = AzurePackage(svc, pkg, *module)
        p.all_models()
        ops += p.operations()
        schemas.update(p.schemas)
    return {"operations": sort_ops(ops), "schemas": schemas}


# --------------------------------------------------------------------------------------------------------------
# OCI: the oci SDK (client methods and swagger models)

OCI_SERVICES = [
    ("core", "oci.core"),
    ("lustre", "oci.lustre_file_storage"),
    # Core's work requests (GetWorkRequest, its errors and logs) are a client of their own on the iaas host.
    ("work_requests", "oci.work_requests"),
    # Service limits (GetResourceAvailability, for the plan's quota check) on the limits host.
    ("limits", "oci.limits"),
    # Container Engine for Kubernetes (OKE): clusters, their kubeconfig, and OKE's own work requests, whose
    # models (WorkRequest, WorkRequestResource) are namespaced oci.containerengine/ apart from Core's.
    ("containerengine", "oci.container_engine"),
    # OCI Vault, for the secret store: KMS vaults and keys (`/20180608`, the vault's management endpoint),
    # Vault secrets (`/20180608/secrets`) and the Secret Retrieval API (`/20190301/secretbundles`).
    ("kms", "oci.key_management"),
    ("vault", "oci.vault"),
    ("secrets", "oci.secrets"),
    # Identity (IAM, `/20160918` like Core, on its own host): compartments, dynamic groups and policies, which
    # decide what an instance principal may read. Its own work requests share Core's `/20160918/workRequests`
    # paths; the emulators tell services apart by path only, so a path an earlier service has keeps that
    # service's operation (see oci_cloud).
    ("identity", "oci.identity"),
]

OCI_SCALARS = {
    "str": {"type": "string"},
    "int": {"type": "integer"},
    "float": {"type": "number"},
    "bool": {"type": "boolean"},
    "datetime": {"type": "string", "format": "date-time"},
    "date": {"type": "string", "format": "date"},
    "object": {"type": "any"},
}

OCI_REQUIRED = "**[Required]**"
OCI_DOC_END = re.compile(r"(:return:|:rtype:|Allowed values for this property are:|Any unrecognized values)")
OCI_DOC_GETS = re.compile(r"^\s*Gets the \w+ of this \w+\.\s*")


class OciService:
    def __init__(self, svc, pkg):
        self.svc, self.pkg, self.ns = svc, pkg, f"oci.{svc}"
        self.package = importlib.import_module(pkg)
        self.models = importlib.import_module(pkg + ".models")
        self.schemas = {}
        # The models: every class the package's models module defines (each sets swagger_types and
        # attribute_map in its __init__).
        self.classes = {
            n: v for n, v in vars(self.models).items() if inspect.isclass(v) and v.__module__.startswith(pkg + ".models.")
        }

    def type_node(self, t):
        t = t.strip()
        if t in OCI_SCALARS:
            return dict(OCI_SCALARS[t])
        m = re.fullmatch(r"list\[(.*)\]", t)
        if m:
            return {"type": "array", "items": self.type_node(m.group(1))}
        m = re.fullmatch(r"dict\(\s*str\s*,(.*)\)", t)
        if m:
            return {"type": "object", "additional": self.type_node(m.group(1))}
        t = t.rsplit(".", 1)[-1]
        if t in self.classes:
            return {"ref": self.model_ref(t)}
        return {"type": "any"}

    def model_ref(self, name):
        full = f"{self.ns}/{name}"
        if full not in self.schemas:
            self.schemas[full] = {}
            self.schemas[full] = self.model_schema(self.classes[name])
        return full

    def class_ast(self, cls):
        tree = parse_file(inspect.getsourcefile(cls))
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
                return node
        return None

    def model_schema(self, cls):
        obj = cls()
        swagger, names = obj.swagger_types, obj.attribute_map
        getters, setters, subtype = {}, {}, None
        # Properties may be inherited: look at the class and its model bases.
        for k in reversed(cls.__mro__):
            if k is object or not getattr(k, "__module__", "").startswith("oci."):
                continue
            node = self.class_ast(k)
            if node is None:
                continue
            for fn in node.body:
                if not isinstance(fn, ast.FunctionDef):
                    continue
                decos = [ast.unparse(d) for d in fn.decorator_list]
                if "property" in decos:
                    getters[fn.name] = ast.get_docstring(fn) or ""
                elif any(d.endswith(".setter") for d in decos):
                    setters[fn.name] = fn
                elif fn.name == "get_subtype" and k is cls:
                    subtype = fn
        props, required = {}, []
        for attr, t in swagger.items():
            json_name = names.get(attr, attr)
            node = self.type_node(t)
            setter = setters.get(attr)
            if setter is not None:
                allowed, strict = None, False
                for n in walk(setter):
                    if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) and n.targets[0].id == "allowed_values":
                        allowed = const(n.value)
                    if isinstance(n, ast.Raise):
                        strict = True
                if isinstance(allowed, list):
                    target = node["items"] if node.get("type") == "array" else node
                    target["enum"] = allowed
                    target["enum_strict"] = strict
            doc = getters.get(attr, "")
            if OCI_REQUIRED in doc:
                required.append(json_name)
            text = OCI_DOC_GETS.sub("", doc.replace(OCI_REQUIRED, "", 1))
            text = OCI_DOC_END.split(text)[0]
            props[json_name] = with_doc(node, text)
        node = {"type": "object", "properties": props}
        if required:
            node["required"] = sorted(required)
        if subtype is not None:
            disc = self.discriminator(subtype)
            if disc:
                node["discriminator"] = disc
        return with_doc(node, (cls.__doc__ or "").split("\n\n")[0])

    def discriminator(self, fn):
        field, mapping = None, {}
        for n in walk(fn):
            if isinstance(n, ast.Subscript) and ast.unparse(n.value) == "object_dictionary":
                field = field or const(n.slice)
            if isinstance(n, ast.If) and isinstance(n.test, ast.Compare) and isinstance(n.test.ops[0], ast.Eq):
                value = const(n.test.comparators[0])
                ret = n.body[0] if n.body and isinstance(n.body[0], ast.Return) else None
                target = const(ret.value) if ret is not None else None
                if isinstance(value, str) and isinstance(target, str) and target in self.classes:
                    mapping[value] = self.model_ref(target)
        if not field:
            return None
        return {"field": field, "mapping": dict(sorted(mapping.items()))}

    def all_models(self):
        for name in sorted(self.classes):
            self.model_ref(name)

    def work_request_methods(self, pkg_dir):
        """Client methods whose composite `*_and_wait_for_*` waits on the opc-work-request-id the call returns."""
        out = set()
        for fname in sorted(os.listdir(pkg_dir)):
            if not fname.endswith("_client_composite_operations.py"):
                continue
            for cls in parse_file(os.path.join(pkg_dir, fname)).body:
                if not isinstance(cls, ast.ClassDef):
                    continue
                for fn in cls.body:
                    if not isinstance(fn, ast.FunctionDef):
                        continue
                    if "opc-work-request-id" not in ast.unparse(fn):
                        continue
                    for c in calls(fn):
                        if isinstance(c.func, ast.Attribute) and ast.unparse(c.func.value) == "self.client":
                            if not c.func.attr.startswith("get_work_request"):
                                out.add(c.func.attr)
                                break
        return out

    def operations(self):
        pkg_dir = os.path.dirname(self.package.__file__)
        work_requests = self.work_request_methods(pkg_dir)
        ops = []
        for fname in sorted(os.listdir(pkg_dir)):
            if not fname.endswith("_client.py"):
                continue
            tree = parse_file(os.path.join(pkg_dir, fname))
            for cls in tree.body:
                if not isinstance(cls, ast.ClassDef):
                    continue
                base_path = None
                init = [fn for fn in cls.body if isinstance(fn, ast.FunctionDef) and fn.name == "__init__"]
                for n in walk(init[0]) if init else ():
                    if isinstance(n, ast.Dict):
                        for k, v in zip(n.keys, n.values):
                            if k is not None and const(k) == "base_path":
                                base_path = const(v)
                if not base_path:
                    continue
                for fn in cls.body:
                    if isinstance(fn, ast.FunctionDef) and not fn.name.startswith("_"):
                        op = self.operation(fn, base_path, fn.name in work_requests)
                        if op:
                            ops.append(op)
        return ops

    def operation(self, fn, base_path, work_request):
        values, query = {}, []
        body_param = response_type = None
        for n in walk(fn):
            if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name):
                name = n.targets[0].id
                if name in ("resource_path", "method", "operation_name", "api_reference_link"):
                    values[name] = const(n.value)
                if name == "query_params" and isinstance(n.value, ast.Dict):
                    query = [const(k) for k in n.value.keys if k is not None]
            if isinstance(n, ast.Call) and call_name(n) in ("call_api", "make_retrying_call"):
                b = kwarg(n, "body")
                if isinstance(b, ast.Name):
                    body_param = b.id
                r = kwarg(n, "response_type")
                if r is not None and isinstance(const(r), str):
                    response_type = const(r)
        if not values.get("resource_path") or not values.get("method"):
            return None
        doc = ast.get_docstring(fn) or ""
        # An optional body (`body=kwargs.get('create_cluster_kubeconfig_content_details')`, not a Name) stays
        # null: the judge demands a body wherever `request` names one. A `stream` response (CreateKubeconfig's
        # YAML) has no schema either, so its body is not judged.
        request = None
        if body_param:
            m = re.search(r":param ([\w.\[\]]+) " + re.escape(body_param) + r":", doc)
            request = self.named(self.type_node(m.group(1)) if m else {"type": "any"})
        response = self.named(self.type_node(response_type)) if response_type and response_type != "stream" else None
        link = values.get("api_reference_link") or None
        op_id = link.rstrip("/").rsplit("/", 1)[-1] if link else pascal(values.get("operation_name") or fn.name)
        version, path = base_path.strip("/"), base_path + values["resource_path"]
        if not version:
            # LimitsClient's base path is "/": each resource path starts with its version (/20190729/services/...).
            path = values["resource_path"]
            version = path.strip("/").split("/", 1)[0]
        return {
            "id": op_id,
            "service": self.svc,
            "version": version,
            "method": values["method"],
            "path": path,
            "query": sorted(q for q in query if isinstance(q, str)),
            "request": request,
            "response": response,
            "long_running": {"kind": "oci-work-request"} if work_request else None,
            "doc": link,
        }

    def named(self, node):
        if set(node) == {"ref"}:
            return node["ref"]
        name = f"{self.ns}/{self._type_name(node)}"
        self.schemas[name] = node
        return name

    def _type_name(self, node):
        if "ref" in node:
            return node["ref"].split("/", 1)[1]
        if node.get("type") == "array":
            return f"list[{self._type_name(node['items'])}]"
        if node.get("type") == "object" and "additional" in node:
            return f"dict(str, {self._type_name(node['additional'])})"
        return {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "any": "object"}.get(node.get("type"), "object")


def oci_cloud():
    ops, schemas, taken = [], {}, set()
    for svc, pkg in OCI_SERVICES:
        s = OciService(svc, pkg)
        s.all_models()
        mine = [o for o in s.operations() if (o["method"], o["path"]) not in taken]
        ops += mine
        taken |= {(o["method"], o["path"]) for o in mine}
        schemas.update(s.schemas)
    return {"operations": sort_ops(ops), "schemas": schemas}


# --------------------------------------------------------------------------------------------------------------
# AWS (optional): botocore's service models for EC2, FSx, Service Quotas, EKS and Secrets Manager

AWS_SERVICES = [("ec2", "aws.ec2"), ("fsx", "aws.fsx"), ("service-quotas", "aws.service-quotas"), ("eks", "aws.eks"),
                ("secretsmanager", "aws.secretsmanager")]


class AwsService:
    """One botocore service model. EC2 speaks the `ec2` protocol: a request is a form whose names are a member's
    queryName, else its locationName capitalized, else its name, and a response is XML named by locationName,
    else name; so its shapes come twice, `aws.ec2.query/X` for what requests reach and `aws.ec2/X` for the rest.
    The JSON protocols (FSx; EKS's REST JSON, whose path and query members are left out of the body) use member
    names both ways, and send timestamps as epoch seconds."""

    def __init__(self, svc, ns, model):
        self.svc, self.ns, self.model = svc, ns, model
        self.shapes = model["shapes"]
        self.protocol = model["metadata"].get("protocol")
        self.schemas = {}

    def wire(self, name, member, query):
        if query:
            return member.get("queryName") or (member["locationName"][:1].upper() + member["locationName"][1:] if member.get("locationName") else name)
        return member.get("locationName") or name

    def ref(self, shape_name, query):
        ns = self.ns + ".query" if query else self.ns
        full = f"{ns}/{shape_name}"
        if full not in self.schemas:
            self.schemas[full] = {}
            self.schemas[full] = self.structure(shape_name, query)
        return {"ref": full}

    def structure(self, shape_name, query):
        shape = self.shapes[shape_name]
        props, required = {}, []
        for mname, m in shape.get("members", {}).items():
            if m.get("location") in ("header", "headers", "uri", "querystring", "statusCode"):
                continue  # not in the body
            wire = self.wire(mname, m, query)
            props[wire] = with_doc(self.node(m["shape"], query), re.sub(r"<[^>]+>", "", m.get("documentation") or ""))
            if mname in shape.get("required", []):
                required.append(wire)
        n = {"type": "object", "properties": props}
        if required:
            n["required"] = sorted(required)
        return with_doc(n, re.sub(r"<[^>]+>", "", shape.get("documentation") or ""))

    def node(self, shape_name, query):
        shape = self.shapes[shape_name]
        t = shape["type"]
        if t == "structure":
            return self.ref(shape_name, query)
        if t == "list":
            return {"type": "array", "items": self.node(shape["member"]["shape"], query)}
        if t == "map":
            return {"type": "object", "additional": self.node(shape["value"]["shape"], query)}
        if t == "string":
            n = {"type": "string"}
            if "enum" in shape:
                n["enum"] = list(shape["enum"])
                n["enum_strict"] = False
            return n
        if t in ("integer", "long"):
            return {"type": "integer", "format": "int64" if t == "long" else "int32"}
        if t in ("float", "double"):
            return {"type": "number", "format": t}
        if t == "boolean":
            return {"type": "boolean"}
        if t == "timestamp":
            if self.protocol in ("json", "rest-json"):
                return {"type": "number", "format": "unix-timestamp"}
            return {"type": "string", "format": "date-time"}
        if t == "blob":
            return {"type": "string", "format": "byte"}
        return {"type": "any"}

    def operations(self):
        meta = self.model["metadata"]
        query = self.protocol in ("ec2", "query")
        ops = []
        for name, op in self.model["operations"].items():
            http = op.get("http", {})
            request = self.ref(op["input"]["shape"], query)["ref"] if "input" in op else None
            response = self.ref(op["output"]["shape"], False)["ref"] if "output" in op else None
            ops.append(
                {
                    "id": name,
                    "service": self.svc,
                    "version": meta["apiVersion"],
                    "method": http.get("method", "POST"),
                    "path": http.get("requestUri", "/").split("?")[0],
                    "query": [],
                    "request": request,
                    "response": response,
                    "long_running": None,
                    "doc": None,
                }
            )
        return ops


def aws_cloud():
    try:
        from botocore.loaders import create_loader
    except ImportError:
        return None
    loader = create_loader()
    ops, schemas = [], {}
    for svc, ns in AWS_SERVICES:
        s = AwsService(svc, ns, loader.load_service_model(svc, "service-2"))
        ops += s.operations()
        schemas.update(s.schemas)
    return {"operations": sort_ops(ops), "schemas": schemas}


# --------------------------------------------------------------------------------------------------------------


def extract():
    clouds = {"gcp": gcp(), "azure": azure(), "oci": oci_cloud()}
    aws = aws_cloud()
    if aws is not None:
        clouds["aws"] = aws
    return {"generated_by": GENERATED_BY, "packages": dist_versions(), "clouds": clouds}


def check(doc):
    """Known facts the validator relies on; fails loudly when a package changes shape under the extractor."""
    clouds = doc["clouds"]
    g, a, o = clouds["gcp"], clouds["azure"], clouds["oci"]
    gs, as_, os_ = g["schemas"], a["schemas"], o["schemas"]

    def op(cloud, op_id, version=None):
        found = [x for x in cloud["operations"] if x["id"] == op_id and (version is None or x["version"] == version)]
        assert found, f"operation {op_id} {version or ''} missing"
        return found[0]

    def resolve(schemas, node):
        while "ref" in node:
            node = schemas[node["ref"]]
        return node

    # Integrity: every reference resolves, every schema is filled in, every path is a template from the root.
    for name, cloud in clouds.items():
        schemas = cloud["schemas"]

        def refs(node, where):
            if "ref" in node:
                assert node["ref"] in schemas, f"{where}: dangling ref {node['ref']}"
            for key in ("items", "additional"):
                if key in node:
                    refs(node[key], where)
            for prop, sub in (node.get("properties") or {}).items():
                refs(sub, f"{where}.{prop}")
            for target in ((node.get("discriminator") or {}).get("mapping") or {}).values():
                assert target in schemas, f"{where}: dangling discriminator target {target}"

        for sname, node in schemas.items():
            assert node, f"{sname}: empty schema"
            assert ("type" in node) != ("ref" in node), f"{sname}: needs exactly one of type and ref"
            refs(node, sname)
        for x in cloud["operations"]:
            assert x["path"].startswith("/"), x
            assert x["method"] in ("GET", "PUT", "POST", "PATCH", "DELETE", "HEAD"), x
            assert x["version"], x
            for key in ("request", "response"):
                assert x[key] is None or x[key] in schemas, f"{x['id']}: {key} {x[key]} missing"

    # GCP Compute
    assert "maxDistance" not in gs["compute.v1/ResourcePolicyGroupPlacementPolicy"]["properties"]
    # Secret stores: the paths the emulators serve them at.
    access = op(g, "secretmanager.projects.secrets.versions.access")
    assert access["path"] == "/v1/projects/{projectsId}/secrets/{secretsId}/versions/{versionsId}:access", access["path"]
    assert op(a, "SetSecret")["path"] == "/secrets/{secret-name}" and op(a, "GetSecret")["path"] == "/secrets/{secret-name}/{secret-version}"
    assert op(a, "Vaults_CreateOrUpdate")["request"] == "azure.keyvault/VaultCreateOrUpdateParameters"
    assert "maxDistance" in gs["compute.beta/ResourcePolicyGroupPlacementPolicy"]["properties"]
    inst = gs["compute.v1/Instance"]
    assert inst["properties"]["id"].get("readOnly") is True
    assert inst["properties"]["id"]["format"] == "uint64" and inst["properties"]["id"]["type"] == "string"
    assert "compute.instances.insert" in inst["required_for"]["name"]
    assert inst["properties"]["disks"]["items"] == {"ref": "compute.v1/AttachedDisk"}
    insert = op(g, "compute.instances.insert", "v1")
    assert insert["method"] == "POST" and insert["path"] == "/compute/v1/projects/{project}/zones/{zone}/instances"
    assert "requestId" in insert["query"] and insert["request"] == "compute.v1/Instance"
    assert insert["response"] == "compute.v1/Operation" and insert["long_running"] == {"kind": "gcp-operation"}
    assert op(g, "compute.instances.insert", "beta")["path"].startswith("/compute/beta/")
    assert op(g, "compute.zoneOperations.get", "v1")["long_running"] is None
    # Service Networking
    conn = op(g, "servicenetworking.services.connections.create")
    assert conn["path"] == "/v1/services/{servicesId}/connections" and conn["request"] == "servicenetworking.v1/Connection"
    assert conn["long_running"] == {"kind": "google-longrunning"}
    # Managed Lustre
    create = op(g, "lustre.projects.locations.instances.create")
    assert create["method"] == "POST" and create["path"] == "/v1/projects/{projectsId}/locations/{locationsId}/instances"
    assert create["request"] == "lustre.v1/Instance" and create["response"] == "longrunning/Operation"
    assert "instanceId" in create["query"] and "requestId" in create["query"] and "parent" not in create["query"]
    assert create["long_running"] == {"kind": "google-longrunning"}
    li = gs["lustre.v1/Instance"]
    assert "required" not in li  # REQUIRED holds for create, not for an update-masked patch
    for field in ("capacityGib", "filesystem", "network"):
        assert li["required_for"][field] == ["lustre.projects.locations.instances.create"], li["required_for"]
    assert "name" not in (gs["lustre.v1/ExportDataRequest"].get("required_for") or {})
    assert li["properties"]["state"]["readOnly"] is True and "ACTIVE" in li["properties"]["state"]["enum"]
    assert li["properties"]["capacityGib"] == {**li["properties"]["capacityGib"], "type": "string", "format": "int64"}
    assert li["properties"]["createTime"]["format"] == "date-time"
    assert li["properties"]["labels"]["additional"] == {"type": "string"}
    lop = gs["longrunning/Operation"]["properties"]
    assert lop["error"] == {"ref": "rpc/Status"} and lop["metadata"]["type"] == "any" and lop["done"]["type"] == "boolean"
    assert gs["rpc/Status"]["properties"]["details"] == {"type": "array", "items": {"type": "any"}}
    assert gs["rpc/Status"]["properties"]["code"]["type"] == "integer"
    patch = op(g, "lustre.projects.locations.instances.patch")
    assert patch["path"] == "/v1/projects/{projectsId}/locations/{locationsId}/instances/{instancesId}" and "updateMask" in patch["query"]
    assert op(g, "lustre.projects.locations.operations.get")["long_running"] is None
    # GKE (container v1): node pools, and an operations.get whose path template is Managed Lustre's too (the
    # emulator names the service, see conformance.rs `Call::service`).
    npc = op(g, "container.projects.locations.clusters.nodePools.create")
    assert npc["path"] == "/v1/projects/{projectsId}/locations/{locationsId}/clusters/{clustersId}/nodePools", npc["path"]
    assert npc["service"] == "container" and npc["request"] == "container.v1/CreateNodePoolRequest"
    assert npc["response"] == "container.v1/Operation" and npc["long_running"] == {"kind": "gcp-operation"}
    assert op(g, "container.projects.locations.clusters.nodePools.update")["method"] == "PUT"
    gop = op(g, "container.projects.locations.operations.get")
    assert gop["long_running"] is None and gop["path"] == op(g, "lustre.projects.locations.operations.get")["path"]
    pool = gs["container.v1/NodePool"]["properties"]
    assert pool["etag"].get("readOnly") is True and pool["initialNodeCount"]["type"] == "integer"
    assert gs["container.v1/MaxPodsConstraint"]["properties"]["maxPodsPerNode"] == {**gs["container.v1/MaxPodsConstraint"]["properties"]["maxPodsPerNode"], "type": "string", "format": "int64"}

    # Azure
    rg_delete = op(a, "ResourceGroups_Delete")
    assert rg_delete["method"] == "DELETE" and rg_delete["long_running"]["kind"] == "azure"
    assert rg_delete["long_running"]["statuses"] == [200, 202]
    assert rg_delete["long_running"]["headers"] == {"202": ["Location", "Retry-After"]}
    assert rg_delete["path"].lower() == "/subscriptions/{subscriptionid}/resourcegroups/{resourcegroupname}"
    assert "api-version" in rg_delete["query"]
    vmss = as_["azure.compute/VirtualMachineScaleSet"]
    assert vmss["properties"]["properties"] == {**vmss["properties"]["properties"], "ref": "azure.compute/VirtualMachineScaleSetProperties"}
    assert "location" in vmss["required"] and vmss["properties"]["etag"]["readOnly"] is True
    create = op(a, "VirtualMachineScaleSets_CreateOrUpdate")
    assert create["method"] == "PUT" and create["request"] == create["response"] == "azure.compute/VirtualMachineScaleSet"
    assert create["path"].endswith("/providers/Microsoft.Compute/virtualMachineScaleSets/{vmScaleSetName}")
    assert create["long_running"]["statuses"] == [200, 201]
    lst = op(a, "VirtualMachineScaleSets_List")
    page = as_[lst["response"]]
    assert page["properties"]["value"]["items"] == {"ref": "azure.compute/VirtualMachineScaleSet"} and "nextLink" in page["properties"]
    assert op(a, "Resources_ListByResourceGroup")["method"] == "GET"
    assert op(a, "Subnets_CreateOrUpdate")["request"] == "azure.network/Subnet"
    aml = op(a, "AmlFilesystems_CreateOrUpdate")
    assert aml["request"] == "azure.storagecache/AmlFilesystem"
    prov = as_["azure.compute/VirtualMachineScaleSetProperties"]["properties"]["provisioningState"]
    assert prov["readOnly"] is True
    orch = as_["azure.compute/VirtualMachineScaleSetProperties"]["properties"]["orchestrationMode"]
    assert orch["enum_strict"] is False and "Flexible" in orch["enum"]
    rule = as_["azure.network/FirewallPolicyRule"]["discriminator"]
    assert rule["field"] == "ruleType" and rule["mapping"]["NetworkRule"] == "azure.network/NetworkRule"

    # OCI
    vcn = os_["oci.core/CreateVcnDetails"]
    assert "compartmentId" in vcn["required"]
    launch = os_["oci.core/LaunchInstanceDetails"]
    src = resolve(os_, launch["properties"]["sourceDetails"])
    assert src["discriminator"]["field"] == "sourceType"
    assert src["discriminator"]["mapping"]["image"] == "oci.core/InstanceSourceViaImageDetails"
    assert "imageId" in os_["oci.core/InstanceSourceViaImageDetails"]["properties"]
    state = os_["oci.core/Instance"]["properties"]["lifecycleState"]
    assert state["enum_strict"] is False and "RUNNING" in state["enum"]
    li = op(o, "LaunchInstance")
    assert li["method"] == "POST" and li["path"] == "/20160918/instances" and li["version"] == "20160918"
    assert li["request"] == "oci.core/LaunchInstanceDetails" and li["response"] == "oci.core/Instance"
    assert li["long_running"] == {"kind": "oci-work-request"}
    lst = op(o, "ListInstances")
    assert "compartmentId" in lst["query"] and os_[lst["response"]]["items"] == {"ref": "oci.core/Instance"}
    lfs = [x for x in o["operations"] if x["service"] == "lustre" and x["method"] == "POST" and x["request"] == "oci.lustre/CreateLustreFileSystemDetails"]
    assert lfs and lfs[0]["path"].startswith("/20250228/")
    assert os_["oci.core/Instance"]["properties"]["definedTags"]["additional"]["additional"] == {"type": "any"}
    ra = op(o, "GetResourceAvailability")
    assert ra["path"] == "/20190729/services/{serviceName}/limits/{limitName}/resourceAvailability" and ra["version"] == "20190729"
    assert {"compartmentId", "availabilityDomain"} <= set(ra["query"]) and ra["response"] == "oci.limits/ResourceAvailability"
    assert {"used", "available"} <= set(os_["oci.limits/ResourceAvailability"]["properties"])
    cc = op(o, "CreateCluster", "20180222")
    assert cc["path"] == "/20180222/clusters" and cc["request"] == "oci.containerengine/CreateClusterDetails"
    assert cc["response"] is None and cc["long_running"] == {"kind": "oci-work-request"}
    assert {"name", "compartmentId", "vcnId", "kubernetesVersion"} <= set(os_["oci.containerengine/CreateClusterDetails"]["required"])
    kc = op(o, "CreateKubeconfig", "20180222")
    assert kc["path"] == "/20180222/clusters/{clusterId}/kubeconfig/content" and kc["response"] is None and kc["request"] is None
    assert op(o, "ListClusters", "20180222")["response"] == "oci.containerengine/list[ClusterSummary]"
    assert op(o, "GetWorkRequest", "20180222")["response"] == "oci.containerengine/WorkRequest"
    assert op(o, "GetWorkRequest", "20160918")["response"] == "oci.work_requests/WorkRequest"
    assert "percentComplete" not in os_["oci.containerengine/WorkRequest"]["properties"]
    assert "percentComplete" in os_["oci.work_requests/WorkRequest"]["properties"]
    for op_id, path in [("CreateDynamicGroup", "/20160918/dynamicGroups"), ("CreatePolicy", "/20160918/policies"),
                        ("CreateCompartment", "/20160918/compartments"), ("GetSecretBundleByName", "/20190301/secretbundles/actions/getByName"),
                        ("ScheduleSecretDeletion", "/20180608/secrets/{secretId}/actions/scheduleDeletion")]:
        assert op(o, op_id)["path"] == path, (op_id, op(o, op_id)["path"])
    assert {"compartmentId", "name", "matchingRule", "description"} <= set(os_["oci.identity/CreateDynamicGroupDetails"]["required"])
    if "aws" in clouds:
        w = clouds["aws"]
        assert op(w, "RunInstances")["request"] == "aws.ec2.query/RunInstancesRequest"
        assert op(w, "RunInstances")["response"] == "aws.ec2/Reservation"
        assert "ImageId" in w["schemas"]["aws.ec2.query/RunInstancesRequest"]["properties"]
        assert "instancesSet" in w["schemas"]["aws.ec2/Reservation"]["properties"]
        assert op(w, "CreateFileSystem")["service"] == "fsx"
        assert op(w, "CreateNodegroup")["service"] == "eks" and op(w, "CreateNodegroup")["path"] == "/clusters/{name}/node-groups"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", help="the JSON file to write")
    parser.add_argument("--check", action="store_true", help="assert known facts about the extracted definitions")
    parser.add_argument("--indent", type=int, default=None, help="pretty-print with this indent")
    args = parser.parse_args(argv)
    if not args.out and not args.check:
        parser.error("give OUT.json, --check, or both")
    started = time.monotonic()
    gc.disable()  # millions of AST nodes and no cycles worth collecting: the collector only slows this down
    doc = extract()
    if args.check:
        check(doc)
    if args.out:
        text = json.dumps(doc, sort_keys=True, indent=args.indent, separators=None if args.indent else (",", ":"), ensure_ascii=False)
        tmp = args.out + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        os.replace(tmp, args.out)
    counts = ", ".join(f"{c}: {len(v['operations'])} operations, {len(v['schemas'])} schemas" for c, v in sorted(doc["clouds"].items()))
    print(f"{'checked; ' if args.check else ''}{counts} ({time.monotonic() - started:.1f} s)", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip freeing the parsed sources one object at a time (seconds, for nothing)


if __name__ == "__main__":
    main()
