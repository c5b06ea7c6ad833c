"""Checks custom resources against the openAPIV3Schema of their CustomResourceDefinitions, as an API server
with strict field validation would: every field the schema does not declare is refused (unless the schema
keeps unknown fields, x-kubernetes-preserve-unknown-fields), and so is every type, enum or required field
it breaks.

    python validate_crds.py --crds DIR manifest.yaml ...

Each manifest may hold several YAML documents. A document whose apiVersion and kind no CRD in DIR serves is
listed as `unchecked <group>/<version> <kind>` on stdout (so a caller can tell which kinds were not checked);
each violation is printed, and the exit code is 1 when there is any.
"""

import argparse
import glob
import os
import sys

import jsonschema
import yaml


def strict(schema):
    """The schema with every object that declares properties closed to others, as strict field validation."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items() if not k.startswith("x-kubernetes-")}
        if (schema.get("type") == "object" and "properties" in schema and "additionalProperties" not in schema
                and not schema.get("x-kubernetes-preserve-unknown-fields")):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


def served(crd_dir):
    """(apiVersion, kind) -> the version's schema, for every served version of every CRD in the directory."""
    out = {}
    for path in sorted(glob.glob(os.path.join(crd_dir, "*.yaml"))):
        with open(path, encoding="utf-8") as f:
            for crd in yaml.safe_load_all(f):
                if not crd or crd.get("kind") != "CustomResourceDefinition":
                    continue
                spec = crd["spec"]
                for v in spec["versions"]:
                    if v.get("served"):
                        schema = dict(v["schema"]["openAPIV3Schema"])
                        # The API server fills these in and checks them itself.
                        props = dict(schema.get("properties") or {})
                        for k in ("apiVersion", "kind", "metadata"):
                            props[k] = {"type": "string"} if k != "metadata" else {"type": "object"}
                        schema["properties"] = props
                        out[(f"{spec['group']}/{v['name']}", spec["names"]["kind"])] = strict(schema)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--crds", required=True)
    p.add_argument("manifests", nargs="+")
    a = p.parse_args()
    schemas = served(a.crds)
    if not schemas:
        print(f"no CustomResourceDefinition in {a.crds}", file=sys.stderr)
        return 1
    bad = 0
    for path in a.manifests:
        with open(path, encoding="utf-8") as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        for i, doc in enumerate(docs):
            key = (doc.get("apiVersion"), doc.get("kind"))
            schema = schemas.get(key)
            if schema is None:
                print(f"unchecked {key[0]} {key[1]}")
                continue
            validator = jsonschema.Draft7Validator(schema)
            for e in sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path)):
                at = ".".join(str(p) for p in e.absolute_path) or "(document)"
                print(f"{path} document {i} ({key[1]}): {at}: {e.message}")
                bad += 1
            print(f"checked {key[0]} {key[1]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
