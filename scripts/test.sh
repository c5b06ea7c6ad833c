#!/usr/bin/env bash
# Runs every test: formatting, lints, the licence policy, unit and protocol tests, the docs check, and the
# acceptance suite with the real OpenTofu and Terraform CLIs. Installs what it needs on first use (cached
# under ~/.cache/hpc-provider).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

HPC_STAGE_FILE=$(mktemp "${TMPDIR:-/tmp}/hpc-stages.XXXXXX")
export HPC_STAGE_FILE
trap 'status=$?; print_stage_times "$([ $status = 0 ] && echo passed || echo "failed, exit $status")"; rm -f "$HPC_STAGE_FILE"' EXIT
log "setup: the CLIs, emulators' packages, PostgreSQL and the previous release (cached under $HPC_CACHE)"

HPC_TOFU=$(ensure_tofu)
HPC_TERRAFORM=$(find_terraform)
HPC_TERRAFORM_OLDEST=$(ensure_terraform_oldest)
HPC_MOTO_PYTHON=$(ensure_moto)
HPC_LOCAL_MIRROR=$(ensure_local_provider)
HPC_PG_BIN=$(ensure_postgres)
HPC_PREVIOUS_PROVIDER_DIR=$(ensure_previous_provider)
# Every call the emulators receive is judged by the vendors' published definitions (docs/api-conformance.md);
# HPC_CONFORMANCE=off runs without the judge.
HPC_CONFORMANCE_DEFS=$(ensure_conformance_defs)
HPC_CONFORMANCE_PYTHON=$(ensure_conformance_venv)
HPC_CONFORMANCE=${HPC_CONFORMANCE:-strict}
HPC_CONFORMANCE_LOG=${HPC_CONFORMANCE_LOG:-$(mktemp -d "${TMPDIR:-/tmp}/hpc-conformance.XXXXXX")}
export HPC_TOFU HPC_TERRAFORM HPC_TERRAFORM_OLDEST HPC_MOTO_PYTHON HPC_LOCAL_MIRROR HPC_PG_BIN HPC_PREVIOUS_PROVIDER_DIR
export HPC_CONFORMANCE_DEFS HPC_CONFORMANCE_PYTHON HPC_CONFORMANCE HPC_CONFORMANCE_LOG
log "CLIs under test: every case with OpenTofu and the newest Terraform; a smoke set with the oldest supported"
"$HPC_TOFU" version 2>/dev/null | awk '/^OpenTofu v/ && !n {print; n=1}'
if [ -n "$HPC_TERRAFORM" ]; then "$HPC_TERRAFORM" version 2>/dev/null | awk '/^Terraform v/ && !n {print; n=1}'; else echo "Terraform 1.11 or later: absent (its cases are skipped)"; fi
echo "$("$HPC_TERRAFORM_OLDEST" version 2>/dev/null | awk '/^Terraform v/ && !n {print; n=1}') (oldest supported: smoke set)"
"$HPC_PG_BIN/postgres" --version

log "cargo fmt --check"
cargo fmt --all -- --check

log "cargo clippy -D warnings"
cargo clippy --quiet --workspace --all-targets -- -D warnings

log "licences of everything linked (cargo deny)"
"$(ensure_cargo_deny)" check licenses 2>&1 | grep -v '^warning\|^ *[┌│━]\|^$' || true
"$(ensure_cargo_deny)" check licenses >/dev/null 2>&1

log "build: every test target (debug)"
cargo test --workspace --lib --bins --tests --no-run --quiet

log "tests: unit, protocol, planner goldens, docs, emulators (aws-sdk-ec2/fsx on moto; google-cloud-compute/lustre, ARM over HTTPS, signed OCI on ours), acceptance (OpenTofu and the newest Terraform; Terraform 1.0.3 smoke set)"
# Benches are left out on purpose: they print figures (./scripts/bench.sh) and never gate a build.
cargo test --workspace --lib --bins --tests -- --skip fault_suite

log "fault suite (tofu; every cloud): throttling, no capacity, 5xx bursts, slow APIs, provider killed, Ctrl-C"
faults_log=$(mktemp)
if ! cargo test --quiet --test acceptance fault_suite -- --nocapture >"$faults_log" 2>&1; then
  cat "$faults_log"
  exit 1
fi
grep -E '^(fault suite|cloud|aws|gcp|azure|oci) ' "$faults_log"

if [ "$HPC_CONFORMANCE" = strict ]; then
  log "conformance: every call judged by the vendors' definitions, every listed operation exercised"
  python3 scripts/conformance_report.py "$HPC_CONFORMANCE_LOG" docs/api-conformance.md "$HPC_CONFORMANCE_DEFS"
fi

