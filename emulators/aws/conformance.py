"""botocore's own service models as the judge of every call the AWS emulator (moto + hpc_moto.py) receives and
every answer it gives (EC2, FSx, Service Quotas, EKS, Secrets Manager): the AWS half of emulators/src/conformance.rs.

`HPC_CONFORMANCE=strict` turns the judge on. A request the models refuse is answered as EC2 or FSx would:
EC2 (the `ec2` query protocol) with `InvalidAction` for an Action it does not have, `NoSuchVersion` for
another API version, `UnknownParameter` for a form key that names no member of the input shape (walked
through the shape tree by each member's ec2 wire name: queryName, else the capitalised locationName, else
the member name; lists as `Name.N`), `InvalidParameterValue` for a value outside an enum or of the wrong
type, `MissingParameter` for a required member left out; FSx, Service Quotas and Secrets Manager (JSON 1.1) with `UnknownOperationException`,
`SerializationException` for a JSON value of the wrong type and `ValidationException` for unknown members,
enum and range violations and missing required members, in their `{"__type", "Message"}` shape; EKS
(REST JSON, the operation found by method and path among the model's `requestUri`s, the service by the
request's signing scope) with `InvalidParameterException` and `InvalidRequestException` as EKS sends them
(`x-amzn-ErrorType`, `{"message"}`), its path and query members walked with the body's. A
successful answer is parsed by botocore's own parser against the output shape and walked (XML elements or
JSON keys must be members, required members present, scalars of their type, enums in their set); one that
breaks it becomes a 500 whose message starts "EMULATOR CONFORMANCE", so the test that caused it fails.

A request carrying the header `x-hpc-conformance-probe` is a test's deliberate mistake: it is judged whenever
`HPC_CONFORMANCE_DEFS` is set, strict or not, and its refusal is logged as `probe_refused`.

`HPC_CONFORMANCE_LOG`, a directory, collects one JSON line per judged call in `judged-<pid>.jsonl`:
`cloud` ("aws"), `operation` (`ec2.RunInstances`, `fsx.CreateFileSystem`), `version` (the model's
apiVersion), `verdict` (`ok`, `refused`, `bad_response`, `probe_refused`), `message`, `program` (the test
binary that started this emulator).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import threading
import uuid
import xml.etree.ElementTree as ET
from urllib.parse import parse_qsl

PROBE_HEADER = "HTTP_X_HPC_CONFORMANCE_PROBE"
SERVICES = ("ec2", "fsx", "service-quotas", "eks", "secretsmanager")
# The REST JSON services, by the service name in the request's SigV4 credential scope.
REST_SERVICES = ("eks",)
# The JSON 1.1 services, by their X-Amz-Target prefix (botocore metadata targetPrefix).
JSON_TARGETS = {"AWSSimbaAPIService_v20180301": "fsx", "ServiceQuotasV20190624": "service-quotas", "secretsmanager": "secretsmanager"}


class Violation(Exception):
    def __init__(self, code, message, status=400):
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


def strict():
    return os.environ.get("HPC_CONFORMANCE") == "strict"


_models = {}
_models_lock = threading.Lock()


def model(service):
    """botocore's service model (loaded once per process)."""
    with _models_lock:
        if service not in _models:
            import botocore.session
            _models[service] = botocore.session.get_session().get_service_model(service)
        return _models[service]


# ------------------------------------------------------------------------------------------------- logging

_log_lock = threading.Lock()
_log_file = None
_program = None


def program():
    """The test binary (or hpc-emulator) that started this emulator: cargo names them `<name>-<16 hex>`."""
    name = os.environ.get("HPC_CONFORMANCE_PROGRAM")
    if name:
        return name
    try:
        exe = os.path.basename(os.readlink(f"/proc/{os.getppid()}/exe"))
    except OSError:
        return "aws-emulator"
    exe = exe.removesuffix(" (deleted)")  # the test binary was rebuilt while it ran
    stem, _, tail = exe.rpartition("-")
    if stem and len(tail) == 16 and all(c in "0123456789abcdef" for c in tail):
        return stem
    return exe


# The vendors' own Python clients, by the User-Agent they send (the vendor-client tests drive them).
VENDOR_SDKS = ("Boto3/", "Botocore/", "botocore/")


def client_of(user_agent):
    """"vendor-sdk" for the vendor's own client, "provider" for everything else (the provider, Rust SDKs)."""
    return "vendor-sdk" if any(s in user_agent for s in VENDOR_SDKS) else "provider"


def record(line):
    global _log_file
    directory = os.environ.get("HPC_CONFORMANCE_LOG")
    if not directory:
        return
    global _program
    if _program is None:
        _program = program()
    line = {"cloud": "aws", **line, "program": _program}
    with _log_lock:
        if _log_file is None:
            os.makedirs(directory, exist_ok=True)
            _log_file = open(os.path.join(directory, f"judged-{os.getpid()}.jsonl"), "a", encoding="utf-8")
        _log_file.write(json.dumps(line) + "\n")
        _log_file.flush()


# ------------------------------------------------------------------------------------------ EC2 requests


def ec2_wire_name(name, shape):
    """The form name of a member in the ec2 protocol (botocore's EC2Serializer)."""
    s = shape.serialization
    if "queryName" in s:
        return s["queryName"]
    if "name" in s:
        return s["name"][0].upper() + s["name"][1:]
    return name


def _ec2_members(shape):
    cache = getattr(shape, "_hpc_ec2_members", None)
    if cache is None:
        cache = {ec2_wire_name(n, m): (n, m) for n, m in shape.members.items()}
        shape._hpc_ec2_members = cache
    return cache


def _enum_values(shape):
    return list(getattr(shape, "enum", None) or [])


def _scalar_ok(shape, text):
    """None when `text` is a valid wire form of the scalar shape, else what is wrong."""
    t = shape.type_name
    try:
        if t in ("integer", "long"):
            int(text)
        elif t in ("float", "double"):
            float(text)
        elif t == "boolean":
            if text not in ("true", "false"):
                return "is not a boolean (true or false)"
        elif t == "timestamp":
            from botocore.utils import parse_timestamp
            parse_timestamp(text)
        elif t == "blob":
            base64.b64decode(text, validate=True)
    except (ValueError, TypeError, binascii.Error):
        return f"is not a valid {t}"
    return None


def ec2_request(op, params):
    """Judges a form's parameters (Action and Version removed) against the operation's input shape."""
    shape = op.input_shape
    if shape is None:
        if params:
            key = sorted(params)[0]
            raise Violation("UnknownParameter", f"The parameter {key} is not recognized")
        return
    structures = {(): shape}  # path of each structure the form reaches -> its shape
    present = set()  # every path prefix some key reaches
    for key, value in params.items():
        parts = key.split(".")
        node = shape
        path = ()
        for i, part in enumerate(parts):
            t = node.type_name
            if t == "structure":
                found = _ec2_members(node).get(part)
                if found is None:
                    raise Violation("UnknownParameter", f"The parameter {'.'.join(parts[: i + 1])} is not recognized")
                node = found[1]
            elif t == "list":
                if not part.isdigit() or int(part) < 1:
                    raise Violation("UnknownParameter", f"The parameter {'.'.join(parts[: i + 1])} is not recognized")
                node = node.member
            elif t == "map":
                node = None  # EC2 has no map inputs the provider sends; accept what is below one
                break
            else:
                raise Violation("UnknownParameter", f"The parameter {'.'.join(parts[: i + 1])} is not recognized")
            path = path + (part,)
            present.add(path)
            if node.type_name == "structure":
                structures[path] = node
        if node is None:
            continue
        if node.type_name in ("structure", "list", "map"):
            if value == "" and node.type_name == "list":
                continue  # an empty list
            raise Violation("InvalidParameterValue", f"The parameter {key} must name the members of a {node.type_name}")
        wrong = _scalar_ok(node, value)
        if wrong:
            raise Violation("InvalidParameterValue", f"Invalid value '{value}' for {key}: it {wrong}")
        enum = _enum_values(node)
        if enum and value not in enum:
            raise Violation(
                "InvalidParameterValue",
                f"Value ({value}) for parameter {parts[-1]} is invalid. Valid values are: {', '.join(enum)}.",
            )
    for path, struct in structures.items():
        if path and path not in present:
            continue
        for name in struct.required_members:
            wire = ec2_wire_name(name, struct.members[name])
            if path + (wire,) not in present:
                full = ".".join(path + (wire,))
                raise Violation("MissingParameter", f"The request must contain the parameter {full}")


# ------------------------------------------------------------------------------------------ FSx requests


def _json_type_error(shape, value):
    """Coral's serialization message when a JSON value is not of the shape's type, else None."""
    t = shape.type_name
    kind = ("BOOLEAN_VALUE" if isinstance(value, bool) else "NUMBER_VALUE" if isinstance(value, (int, float))
            else "STRING_VALUE" if isinstance(value, str) else "START_ARRAY" if isinstance(value, list)
            else "START_OBJECT" if isinstance(value, dict) else "VALUE")
    ok = {
        "structure": isinstance(value, dict),
        "map": isinstance(value, dict),
        "list": isinstance(value, list),
        "string": isinstance(value, str),
        "blob": isinstance(value, str),
        "boolean": isinstance(value, bool),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "long": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        "double": isinstance(value, (int, float)) and not isinstance(value, bool),
        "timestamp": isinstance(value, (int, float, str)) and not isinstance(value, bool),
    }.get(t, True)
    if ok:
        return None
    java = {"structure": "a structure", "map": "a Map", "list": "a List", "string": "String", "blob": "a ByteBuffer",
            "boolean": "Boolean", "integer": "an Integer", "long": "a Long", "float": "a Float", "double": "a Double",
            "timestamp": "a Date"}[t]
    return f"{kind} can not be converted to {java}"


def _camel(name):
    return name[:1].lower() + name[1:]


def json_value(shape, value, at, direction):
    """Walks a decoded JSON value against a shape. Request violations are FSx's own; response ones are ours."""
    if value is None:
        return
    wrong = _json_type_error(shape, value)
    if wrong:
        if direction == "request":
            raise Violation("SerializationException", wrong)
        raise Violation("bad_response", f"'{at}' is {type(value).__name__}, the output shape says {shape.type_name}")
    t = shape.type_name
    meta = shape.metadata or {}
    if t == "structure":
        for key, v in value.items():
            member = shape.members.get(key)
            if member is None:
                if direction == "request":
                    raise Violation("ValidationException",
                                    f"1 validation error detected: '{key}' at '{at or 'request'}' is not a member of {shape.name}; "
                                    f"known members: {', '.join(shape.members)}")
                raise Violation("bad_response", f"'{at + '.' if at else ''}{key}' is not a member of {shape.name}")
            json_value(member, v, f"{at}.{_camel(key)}" if at else _camel(key), direction)
        for name in shape.required_members:
            if value.get(name) is None:
                where = f"{at}.{_camel(name)}" if at else _camel(name)
                if direction == "request":
                    raise Violation("ValidationException",
                                    f"1 validation error detected: Value null at '{where}' failed to satisfy constraint: Member must not be null")
                raise Violation("bad_response", f"the required member '{where}' of {shape.name} is missing")
    elif t == "list":
        if direction == "request":
            _range(len(value), meta, at, "have length")
        for i, v in enumerate(value):
            json_value(shape.member, v, f"{at}.{i + 1}", direction)
    elif t == "map":
        for k, v in value.items():
            json_value(shape.value, v, f"{at}.{k}", direction)
    elif t == "string":
        enum = _enum_values(shape)
        if direction == "response":
            _response_enum(shape, value, at)
        elif enum and value not in enum:
            raise Violation("ValidationException",
                            f"1 validation error detected: Value '{value}' at '{at}' failed to satisfy constraint: "
                            f"Member must satisfy enum value set: [{', '.join(enum)}]")
        if direction == "request":
            _range(len(value), meta, at, "have length")
    elif t in ("integer", "long") and direction == "request":
        _range(value, meta, at, "have value")
    elif t == "timestamp" and direction == "response" and isinstance(value, str):
        raise Violation("bad_response", f"'{at}' is the string {value!r}; JSON 1.1 sends timestamps as epoch seconds")


def _response_enum(shape, value, at):
    """An answer's enum value must be one of the model's, compared without case: EC2 documents `windows` for
    Instance.Platform while the model spells the value `Windows`, and SDKs read enums case-insensitively there."""
    enum = _enum_values(shape)
    if enum and value.lower() not in {e.lower() for e in enum}:
        raise Violation("bad_response", f"{at} is '{value}', not one of {shape.name}'s values {enum}")


def _range(n, meta, at, what):
    if "min" in meta and n < meta["min"]:
        raise Violation("ValidationException", f"1 validation error detected: Value at '{at}' failed to satisfy constraint: "
                                               f"Member must {what} greater than or equal to {meta['min']}")
    if "max" in meta and n > meta["max"]:
        raise Violation("ValidationException", f"1 validation error detected: Value at '{at}' failed to satisfy constraint: "
                                               f"Member must {what} less than or equal to {meta['max']}")


# --------------------------------------------------------------------------------------------- responses


def _local(tag):
    return tag.rsplit("}", 1)[-1]


def _xml_name(name, shape):
    return shape.serialization.get("name") or name


def xml_value(shape, el, at):
    t = shape.type_name
    if t == "structure":
        members = {_xml_name(n, m): (n, m) for n, m in shape.members.items()}
        flattened = {}
        for n, m in shape.members.items():
            if m.type_name == "list" and m.serialization.get("flattened"):
                flattened[_xml_name(m.member.name, m.member) if "name" in m.member.serialization else _xml_name(n, m)] = (n, m)
        seen = set()
        for child in el:
            tag = _local(child.tag)
            if tag in members:
                n, m = members[tag]
                seen.add(n)
                xml_value(m, child, f"{at}.{tag}")
            elif tag in flattened:
                n, m = flattened[tag]
                seen.add(n)
                xml_value(m.member, child, f"{at}.{tag}")
            else:
                raise Violation("bad_response", f"<{tag}> at {at} is not a member of {shape.name} (members: {', '.join(members)})")
        for name in shape.required_members:
            if name not in seen:
                raise Violation("bad_response", f"the required member {name} of {shape.name} is missing at {at}")
    elif t == "list":
        item = shape.member.serialization.get("name") or "member"
        for i, child in enumerate(el):
            tag = _local(child.tag)
            if tag != item:
                raise Violation("bad_response", f"<{tag}> in the list {at} should be <{item}>")
            xml_value(shape.member, child, f"{at}.{i + 1}")
    elif t == "map":
        return
    else:
        if len(el):
            raise Violation("bad_response", f"{at} should be a {t} but has elements <{_local(el[0].tag)}>")
        text = el.text or ""
        if t == "string":
            _response_enum(shape, text, at)
            return
        wrong = _scalar_ok(shape, text.strip())
        if wrong:
            raise Violation("bad_response", f"{at} is '{text}', which {wrong}")


def ec2_response(op, status, headers, body):
    from botocore.parsers import create_parser
    if op.output_shape is not None:
        try:
            create_parser("ec2").parse({"body": body, "headers": dict(headers), "status_code": status}, op.output_shape)
        except Exception as e:  # botocore could not read it
            raise Violation("bad_response", f"botocore's ec2 parser cannot read the answer: {e}")
    try:
        root = ET.fromstring(body)
    except ET.ParseError as e:
        raise Violation("bad_response", f"the answer is not XML: {e}")
    want = f"{op.name}Response"
    if _local(root.tag) != want:
        raise Violation("bad_response", f"the answer's root is <{_local(root.tag)}>, not <{want}>")
    shape = op.output_shape
    members = {_xml_name(n, m): m for n, m in shape.members.items()} if shape is not None else {}
    for child in root:
        tag = _local(child.tag)
        if tag in ("requestId", "RequestId"):
            continue
        if shape is None and tag == "return":  # EC2 answers an operation without output with <return>true</return>
            continue
        if tag not in members:
            raise Violation("bad_response", f"<{tag}> is not a member of {shape.name if shape is not None else 'the (empty) output'}"
                                            f" (members: {', '.join(members)})")
        xml_value(members[tag], child, tag)
    if shape is not None:
        seen = {_local(c.tag) for c in root}
        for name in shape.required_members:
            if _xml_name(name, shape.members[name]) not in seen:
                raise Violation("bad_response", f"the required member {name} of {shape.name} is missing")


def json_response(op, status, headers, body, protocol="json"):
    """A JSON 1.1 answer (FSx, Service Quotas) or a REST JSON one (EKS) against its output shape."""
    from botocore.parsers import create_parser
    shape = op.output_shape
    if shape is None:
        return
    try:
        create_parser(protocol).parse({"body": body, "headers": dict(headers), "status_code": status}, shape)
        value = json.loads(body or b"{}")
    except Exception as e:
        raise Violation("bad_response", f"botocore's json parser cannot read the answer: {e}")
    json_value(shape, value, "", "response")


# ------------------------------------------------------------------------------------------------- gate


class Judged:
    """A call that passed: what its answer is judged by."""

    def __init__(self, service, op, version):
        self.service, self.op, self.version = service, op, version

    @property
    def operation(self):
        return f"{self.service}.{self.op.name}"


def enabled(environ):
    probe = PROBE_HEADER in environ
    return strict() or (probe and bool(os.environ.get("HPC_CONFORMANCE_DEFS")))


def signing_service(environ):
    """The service a SigV4-signed request names in its credential scope (`Credential=<key>/<date>/<region>/<service>/aws4_request`)."""
    auth = environ.get("HTTP_AUTHORIZATION", "")
    cred = auth.split("Credential=", 1)[-1].split(",", 1)[0] if "Credential=" in auth else ""
    parts = cred.split("/")
    return parts[3] if len(parts) >= 5 else None


_rest_routes = {}


def _routes(m):
    """(method, compiled path pattern, operation model) for every operation of a REST model, longest literal first."""
    import re
    key = m.service_name
    if key not in _rest_routes:
        routes = []
        for name in m.operation_names:
            op = m.operation_model(name)
            uri = op.http["requestUri"].split("?", 1)[0]
            pattern = re.sub(r"\\\{([A-Za-z0-9_]+)(\\\+)?\\\}",
                             lambda g: f"(?P<{g.group(1)}>.+)" if g.group(2) else f"(?P<{g.group(1)}>[^/]+)", re.escape(uri))
            routes.append((op.http["method"], re.compile(f"^{pattern}$"), op, len(uri.split("{")[0])))
        routes.sort(key=lambda r: -r[3])
        _rest_routes[key] = routes
    return _rest_routes[key]


def rest_request(m, environ, body):
    """(operation, params) of a REST JSON request: the operation whose method and requestUri match, its
    members gathered from the path, the query string and the JSON body."""
    from urllib.parse import unquote
    method = environ.get("REQUEST_METHOD", "GET")
    # The path as sent: a label's value may hold an encoded "/" (an ARN), which PATH_INFO has decoded.
    raw = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    path = raw.split("?", 1)[0] if raw else environ.get("PATH_INFO", "/")
    for verb, pattern, op, _ in _routes(m):
        found = pattern.match(path)
        if verb == method and found:
            break
    else:
        raise Violation("InvalidRequestException", f"{method} {path} is no operation of {m.metadata['serviceId']}", 404)
    try:
        params = json.loads(body) if body else {}
    except ValueError as e:
        raise Violation("InvalidRequestException", f"the body is not JSON: {e}")
    if not isinstance(params, dict):
        raise Violation("InvalidRequestException", "the body is not a JSON object")
    query = {}
    for k, v in parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True):
        query.setdefault(k, []).append(v)
    shape = op.input_shape
    for member, mshape in (shape.members.items() if shape is not None else []):
        where, wire = mshape.serialization.get("location"), mshape.serialization.get("name", member)
        if member in params and where:
            raise Violation("InvalidParameterException", f"{member} belongs in the {where}, not the body")
        if where == "uri" and found.groupdict().get(wire) is not None:
            params[member] = unquote(found.group(wire))
        elif where == "querystring" and wire in query:
            values = query.pop(wire)
            if mshape.type_name == "list":
                params[member] = values
            elif mshape.type_name in ("integer", "long"):
                try:
                    params[member] = int(values[0])
                except ValueError:
                    raise Violation("InvalidParameterException", f"{wire}={values[0]!r} is not a number")
            elif mshape.type_name == "boolean":
                params[member] = values[0] == "true"
            else:
                params[member] = values[0]
    if query:
        raise Violation("InvalidParameterException", f"query parameters {sorted(query)} are not members of {op.name}")
    return op, params


def judge_request(environ, body):
    """(Judged or None, refusal or None): None, None when the judge is off for this call."""
    if not enabled(environ):
        return None, None
    probe = PROBE_HEADER in environ
    service, name, version = "?", "?", ""
    try:
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        scope = signing_service(environ)
        if scope in REST_SERVICES:
            service = scope
            m = model(service)
            version = m.api_version
            op, params = rest_request(m, environ, body)
            name = op.name
            if op.input_shape is not None:
                json_value(op.input_shape, params, "", "request")
            judged = Judged(service, op, version)
        elif target:
            prefix, _, name = target.partition(".")
            service = JSON_TARGETS.get(prefix, "fsx")
            m = model(service)
            version = m.api_version
            if prefix != m.metadata["targetPrefix"]:
                raise Violation("UnknownOperationException", f"{target} is not an operation of {m.metadata['targetPrefix']}")
            if name not in m.operation_names:
                raise Violation("UnknownOperationException", f"{name} is not an operation of {m.metadata['serviceId']}")
            op = m.operation_model(name)
            try:
                params = json.loads(body or b"{}")
            except ValueError as e:
                raise Violation("SerializationException", f"the body is not JSON: {e}")
            if not isinstance(params, dict):
                raise Violation("SerializationException", "the body is not a JSON object")
            if op.input_shape is not None:
                json_value(op.input_shape, params, "", "request")
            judged = Judged(service, op, version)
        else:
            form = parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True) + parse_qsl(
                environ.get("QUERY_STRING", ""), keep_blank_values=True)
            params = dict(form)
            if "Action" not in params:
                raise Violation("MissingAction", "The request must contain the parameter Action")
            service = "ec2"
            name = params.pop("Action")
            asked = params.pop("Version", None)
            m = model("ec2")
            version = m.api_version
            if name not in m.operation_names:
                raise Violation("InvalidAction", f"The action {name} is not valid for this web service.")
            if asked is None:
                raise Violation("MissingParameter", "The request must contain the parameter Version")
            if asked != m.api_version:
                raise Violation("NoSuchVersion", f"The requested version ({asked}) of service AmazonEC2 does not exist")
            op = m.operation_model(name)
            ec2_request(op, params)
            judged = Judged("ec2", op, version)
    except Violation as v:
        record({"operation": f"{service}.{name}", "version": version, "verdict": "probe_refused" if probe else "refused",
                "code": v.code, "message": v.message})
        return None, error_response(service, v)
    record({"operation": judged.operation, "version": version, "verdict": "ok", "message": "",
            "client": client_of(environ.get("HTTP_USER_AGENT", ""))})
    return judged, None


def judge_response(judged, status, headers, body):
    """None when the answer is fine (or not judged: errors have the service's fixed shape), else the 500."""
    if judged is None or not 200 <= status < 300:
        return None
    try:
        if judged.service == "ec2":
            ec2_response(judged.op, status, headers, body)
        elif judged.service in REST_SERVICES:
            json_response(judged.op, status, headers, body, protocol="rest-json")
        else:
            json_response(judged.op, status, headers, body)
    except Violation as v:
        record({"operation": judged.operation, "version": judged.version, "verdict": "bad_response", "message": v.message})
        if not strict():
            return None
        message = (f"EMULATOR CONFORMANCE: the answer to {judged.operation} ({judged.version}) breaks botocore's model: "
                   f"{v.message}")
        return error_response(judged.service, Violation("EmulatorConformance", message, 500))
    return None


def _xml_escape(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def error_response(service, v):
    """(status, headers, body) in the service's own error shape."""
    request_id = str(uuid.uuid4())
    if service in REST_SERVICES:
        body = json.dumps({"message": v.message}).encode()
        headers = [("Content-Type", "application/json"), ("x-amzn-RequestId", request_id), ("x-amzn-ErrorType", v.code)]
    elif service in JSON_TARGETS.values():
        body = json.dumps({"__type": v.code, "Message": v.message}).encode()
        headers = [("Content-Type", "application/x-amz-json-1.1"), ("x-amzn-RequestId", request_id)]
    else:
        body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{v.code}</Code>'
                f"<Message>{_xml_escape(v.message)}</Message></Error></Errors><RequestID>{request_id}</RequestID></Response>").encode()
        headers = [("Content-Type", "text/xml"), ("x-amzn-RequestId", request_id)]
    return v.status, headers + [("Content-Length", str(len(body)))], body


def preload():
    """Loads the models before the first call when the judge is on (so the first call is not slow)."""
    if strict() or os.environ.get("HPC_CONFORMANCE_DEFS"):
        for s in SERVICES:
            model(s)
