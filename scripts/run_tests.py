#!/usr/bin/env python3
"""Runs the test binaries `cargo test --no-run --message-format=json` built, in two lanes side by side:

- the acceptance suite (real CLIs against the emulators: mostly waiting on processes and polls), with
  HPC_ACCEPTANCE_THREADS cases at a time (4 unless set), then the fault suite on its own;
- every other test binary, the longest known first (the contract suite, the per-cloud tests, the real
  Slurm), then the emulator, unit, protocol, planner, docs and lint tests (lint: about 20 s), each with the
  harness's own threads.
  Both lanes take them from one queue: the second from the start, the first once the fault suite is done,
  so neither lane idles while the other has a queue.

Each binary runs where `cargo test` would run it (its package's directory, CARGO_MANIFEST_DIR set) and its
output is kept in a file; a binary that fails has its output printed whole. At the end one line per binary
says how long it took. Exits 1 when any binary failed. The fault suite's table is printed as it is.

The tests are confined: the mode and owner of every entry directly under / (symlinks not followed) and of
/usr/lib are read before the first binary starts and after the last one ends, and the run fails (exit 1)
naming each one that changed, with its mode and owner before and after (a node-side script once ran
`chmod 644 "$new"/*` with $new empty). Only lstat: it takes milliseconds. HPC_WATCHED_PATHS=<path>[:<path>...]
watches those paths instead; `--self-check` proves the check on a scratch directory (a stand-in test binary
changes its mode, and then its owner when run as root: the run must fail naming it; one that changes
nothing must pass), without touching the machine's own directories.

usage: run_tests.py <cargo json messages> [binary-name filter ...]
       run_tests.py --self-check
"""

import grp
import json
import os
import pwd
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

FAULT_SUITE = "fault_suite"
# Seconds a binary may run before it is killed and reported with its output so far, so that one that hangs
# fails the run with the names of its running cases well inside CI's 90 minutes: the acceptance suite takes
# about 18 minutes and the fault suite 5, the longest other binary 10.
LIMIT = 1500
ACCEPTANCE_LIMIT = 2700
FAULTS_LIMIT = 900


def watched_paths():
    """The paths whose mode and owner the tests must leave as they were: every entry directly under / and
    /usr/lib, or HPC_WATCHED_PATHS (colon-separated) when it is set."""
    override = os.environ.get("HPC_WATCHED_PATHS")
    if override is not None:
        return [p for p in override.split(":") if p]
    with os.scandir("/") as entries:
        top = sorted(e.path for e in entries)
    return top + ["/usr/lib"]


def describe(st):
    """A path's mode and owner as `ls -l` and `stat` show them, or that it is absent."""
    if st is None:
        return "absent"
    user, group = str(st.st_uid), str(st.st_gid)
    try:
        user = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        pass
    try:
        group = grp.getgrgid(st.st_gid).gr_name
    except KeyError:
        pass
    return f"{stat.filemode(st.st_mode)} ({stat.S_IMODE(st.st_mode):04o}) {user}:{group} ({st.st_uid}:{st.st_gid})"


def snapshot(paths):
    """{path: (mode, uid, gid, how `describe` shows them) or None when absent}, by lstat: a symlink is
    recorded as itself."""
    out = {}
    for path in paths:
        try:
            st = os.lstat(path)
            out[path] = (st.st_mode, st.st_uid, st.st_gid, describe(st))
        except FileNotFoundError:
            out[path] = None
    return out


def changes(before, after):
    """One line per watched path whose mode or owner differs between the two snapshots."""
    lines = []
    for path, was in before.items():
        now = after.get(path)
        if (was and was[:3]) != (now and now[:3]):
            lines.append(f"  {path}: before {was[3] if was else 'absent'}; after {now[3] if now else 'absent'}")
    return lines


def self_check():
    """Runs this script on a stand-in test binary that changes nothing, one that changes a watched scratch
    directory's mode, and as root one that changes its owner: the first run must pass, each other must fail
    naming the directory with its mode and owner before and after. Exits 1 when one does not."""
    problems = []
    with tempfile.TemporaryDirectory(prefix="hpc-confinement-") as tmp:
        scratch = os.path.join(tmp, "watched")
        os.mkdir(scratch, 0o755)
        os.chmod(scratch, 0o755)
        cases = [("changes nothing", "true", 0, [])]
        cases.append(("chmod 700", f"chmod 700 '{scratch}'", 1, [scratch + ": before drwxr-xr-x (0755)", "after drwx------ (0700)"]))
        if os.geteuid() == 0:
            cases.append(("chown 65534", f"chown 65534 '{scratch}'", 1, [scratch + ": before ", "after drwxr-xr-x (0755)", f"(65534:{os.lstat(scratch).st_gid})"]))
        for name, command, code, expected in cases:
            os.chmod(scratch, 0o755)
            os.chown(scratch, os.geteuid(), os.getegid())
            exe = os.path.join(tmp, "stand-in-test")
            with open(exe, "w") as f:
                f.write(f"#!/bin/sh\n{command}\necho 'test result: ok. 1 passed; 0 failed'\n")
            os.chmod(exe, 0o755)
            messages = os.path.join(tmp, "messages.json")
            with open(messages, "w") as f:
                artifact = {
                    "reason": "compiler-artifact",
                    "profile": {"test": True},
                    "executable": exe,
                    "target": {"src_path": os.path.join(tmp, "stand_in.rs")},
                    "manifest_path": os.path.join(tmp, "Cargo.toml"),
                }
                f.write(json.dumps(artifact) + "\n")
            env = dict(os.environ, HPC_WATCHED_PATHS=scratch)
            run = subprocess.run([sys.executable, os.path.abspath(__file__), messages], env=env, capture_output=True, text=True, cwd=tmp)
            said = run.stdout + run.stderr
            missing = [e for e in expected if e not in said]
            if run.returncode != code or missing:
                problems.append(f"a stand-in test that {name}: exit {run.returncode} (expected {code}), missing {missing} in:\n{said}")
            else:
                line = next((l.strip() for l in said.splitlines() if l.startswith(f"  {scratch}:")), "passed, nothing changed")
                print(f"confinement self-check: a stand-in test that {name}: exit {run.returncode}: {line}")
    if problems:
        print("confinement self-check FAILED:\n" + "\n".join(problems))
        sys.exit(1)
    print("confinement self-check: ok (a change to a watched path fails the run and is named; no change passes)")


def binaries(path):
    """(name, package dir, executable) of each test binary, in cargo's order, without duplicates."""
    seen, out = set(), []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            m = json.loads(line)
            if m.get("reason") != "compiler-artifact" or not m.get("profile", {}).get("test") or not m.get("executable"):
                continue
            exe = m["executable"]
            if exe in seen:
                continue
            seen.add(exe)
            target = m["target"]
            package = os.path.dirname(m["manifest_path"])
            # Its source file from the workspace root: tests/aws.rs, emulators/tests/aws.rs, src/lib.rs.
            label = os.path.relpath(target["src_path"], os.getcwd())
            out.append((label, package, exe))
    return out


class Run:
    def __init__(self, label, package, exe, args, limit=LIMIT):
        self.label, self.package, self.exe, self.args, self.limit = label, package, exe, args, limit
        self.log = tempfile.NamedTemporaryFile(prefix="hpc-test-", suffix=".log", delete=False)
        self.code = None
        self.seconds = 0.0

    def __call__(self):
        env = dict(os.environ, CARGO_MANIFEST_DIR=self.package)
        # The main job's narration (scripts/demo.sh, run as a test) must not open stages of test.sh's table.
        env.pop("HPC_STAGE_FILE", None)
        started = time.monotonic()
        timed_out = False
        with open(self.log.name, "w") as log:
            p = subprocess.Popen([self.exe, *self.args], cwd=self.package, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                self.code = p.wait(timeout=self.limit)
            except subprocess.TimeoutExpired:
                # Its output so far names the cases still running ("has been running for over 60 seconds").
                timed_out = True
                os.killpg(p.pid, signal.SIGKILL)
                self.code = p.wait()
        self.seconds = time.monotonic() - started
        if timed_out:
            with open(self.log.name, "a") as log:
                log.write(f"\n(killed: still running after {self.limit} s, this binary's limit)\n")
        status = "ok" if self.code == 0 else f"FAILED ({'killed after its limit of %d s' % self.limit if timed_out else 'exit %d' % self.code})"
        summary = [l for l in self.output().splitlines() if l.startswith("test result:")]
        print(f"  {self.label}: {status} in {self.seconds:.0f} s; {summary[-1] if summary else ''}", flush=True)

    def output(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()


def lane(runs, queue, lock):
    """Runs `runs`, then takes runs from the front of the shared `queue` until it is empty."""
    for r in runs:
        r()
    while True:
        with lock:
            if not queue:
                return
            r = queue.pop(0)
        r()


def main():
    if sys.argv[1:] == ["--self-check"]:
        self_check()
        return
    watched = watched_paths()
    before = snapshot(watched)
    built = binaries(sys.argv[1])
    wanted = sys.argv[2:]
    if wanted:
        built = [b for b in built if any(w in b[0] for w in wanted)]
    threads = os.environ.get("HPC_ACCEPTANCE_THREADS", "4")
    acceptance = [b for b in built if b[0] == "acceptance/main.rs"]
    others = [Run(*b, []) for b in built if b not in acceptance]
    first = [Run(*b, ["--skip", FAULT_SUITE, "--test-threads", threads], ACCEPTANCE_LIMIT) for b in acceptance]
    faults = [Run(*b, ["--exact", FAULT_SUITE, "--nocapture"], FAULTS_LIMIT) for b in acceptance]
    # The long ones first, so that the lane does not end on one of them while the other lane idles.
    longest = [
        "tests/contract.rs",
        "tests/oci.rs",
        "tests/azure.rs",
        "tests/aws.rs",
        "tests/gcp.rs",
        "tests/slurm/main.rs",
        "tests/rpc_props.rs",
    ]
    others.sort(key=lambda r: longest.index(r.label) if r.label in longest else len(longest))
    print(
        f"{len(built)} test binaries: the acceptance suite ({threads} cases at a time), then the fault suite, beside the others; "
        "both lanes then share what is left",
        flush=True,
    )
    queue, lock = list(others), threading.Lock()
    lanes = [threading.Thread(target=lane, args=(first + faults, queue, lock)), threading.Thread(target=lane, args=([], queue, lock))]
    for t in lanes:
        t.start()
    for t in lanes:
        t.join()
    runs = first + others + faults
    failed = [r for r in runs if r.code != 0]
    for r in faults:
        table = [l for l in r.output().splitlines() if l.split(" ")[0] in ("fault", "cloud", "aws", "gcp", "azure", "oci")]
        print("\n".join(table))
    for r in failed:
        print(f"\n==> {r.label} failed (exit {r.code}); its output:\n{r.output()}")
    print("\ntest binaries, slowest first:")
    for r in sorted(runs, key=lambda r: -r.seconds):
        print(f"{r.seconds:6.0f} s  {r.label}{' ' + ' '.join(r.args) if r.args else ''}")
    for r in runs:
        if r.code == 0:
            os.unlink(r.log.name)
    changed = changes(before, snapshot(watched))
    what = "HPC_WATCHED_PATHS" if "HPC_WATCHED_PATHS" in os.environ else "every entry directly under / and /usr/lib"
    if changed:
        print(f"\n==> FAILED: the tests changed the mode or owner of {len(changed)} of the {len(watched)} paths watched ({what}):")
        print("\n".join(changed))
    else:
        print(f"\nthe {len(watched)} paths watched ({what}): mode and owner unchanged")
    sys.exit(1 if failed or changed else 0)


if __name__ == "__main__":
    main()
