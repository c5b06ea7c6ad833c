#!/usr/bin/env python3
"""After a strict run: every call the emulators judged (HPC_CONFORMANCE_LOG) against
docs/api-conformance.md and the vendors' definitions.

Fails when a call was refused or an emulator's answer broke its definition (deliberate probes aside),
when an operation was called that the document does not list, when a listed operation was never
exercised, or when a listed operation is not in the definitions (id, method, path, version).

    conformance_report.py LOG_DIR docs/api-conformance.md DEFINITIONS.json
"""
import collections
import glob
import json
import os
import sys


def listed_operations(doc_path):
    """Rows of the document's operations table: | cloud | operation | version | method | path | ..."""
    rows = []
    for line in open(doc_path, encoding="utf-8"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 5 or cells[0] not in ("gcp", "azure", "oci", "aws"):
            continue
        strip = lambda c: c.strip("`")
        rows.append({"cloud": cells[0], "id": strip(cells[1]), "version": strip(cells[2]),
                     "method": strip(cells[3]), "path": strip(cells[4])})
    return rows


def main():
    log_dir, doc_path, defs_path = sys.argv[1:4]
    defs = json.load(open(defs_path, encoding="utf-8"))
    listed = listed_operations(doc_path)
    failures = []

    known = {}
    for cloud, cd in defs["clouds"].items():
        for op in cd["operations"]:
            known[(cloud, op["id"], op["version"])] = op
    for row in listed:
        op = known.get((row["cloud"], row["id"], row["version"]))
        if op is None:
            failures.append(f"listed but not in the definitions: {row['cloud']} {row['id']} {row['version']}")
        elif op["method"].upper() != row["method"].upper() or op["path"] != row["path"]:
            failures.append(f"listed as {row['method']} {row['path']} but the definition says "
                            f"{op['method']} {op['path']}: {row['cloud']} {row['id']}")

    calls = collections.Counter()
    bad = collections.Counter()
    probes = 0
    monitors = 0
    for path in glob.glob(os.path.join(log_dir, "*.jsonl")):
        for line in open(path, encoding="utf-8"):
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            verdict = rec.get("verdict")
            if verdict == "ok":
                calls[(rec["cloud"], rec["operation"], rec["version"])] += 1
            elif verdict == "probe_refused":
                probes += 1
            elif verdict == "monitor":
                monitors += 1
            else:
                what = rec.get("operation") or f"{rec.get('method')} {rec.get('path')}"
                bad[(rec["cloud"], verdict, what, rec.get("message", ""))] += 1

    for (cloud, verdict, what, message), n in sorted(bad.items()):
        failures.append(f"{verdict} x{n}: {cloud} {what}: {message}")
    listed_keys = {(r["cloud"], r["id"], r["version"]) for r in listed}
    for key in sorted(set(calls) - listed_keys):
        failures.append(f"called but not listed in {doc_path}: {' '.join(key)} ({calls[key]} calls)")
    judged_clouds = {k[0] for k in calls}
    for key in sorted(listed_keys - set(calls)):
        if key[0] in judged_clouds or not calls:
            failures.append(f"listed but never exercised in this run: {' '.join(key)}")

    total = sum(calls.values())
    print(f"conformance: {total} calls judged, {len(calls)} operations on {', '.join(sorted(judged_clouds))}; "
          f"{len(listed)} listed; {monitors} long-running-operation polls; {probes} deliberate mistakes refused; "
          f"{sum(bad.values())} violations")
    if failures:
        print("\n".join("  " + f for f in failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
