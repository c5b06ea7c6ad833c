#!/usr/bin/env bash
# Runs every test: formatting, lints, the licence policy, unit and protocol tests, the docs check, and the
# acceptance suite with the real OpenTofu and Terraform CLIs. Installs what it needs on first use (cached
# under ~/.cache/hpc-provider). What does not need the Rust build (OpenTofu and hashicorp/local from the Go
# module proxy, the PyPI packages, cargo-deny, the previous release) is set up in the background beside it;
# the timings table at the end shows both. The run fails if the tests changed the mode or owner of anything
# directly under / or of /usr/lib (scripts/run_tests.py).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT" || exit 1

HPC_STAGE_FILE=$(mktemp "${TMPDIR:-/tmp}/hpc-stages.XXXXXX")
HPC_JOBS=$(mktemp -d "${TMPDIR:-/tmp}/hpc-jobs.XXXXXX")
BINARIES=$(mktemp "${TMPDIR:-/tmp}/hpc-binaries.XXXXXX")
export HPC_STAGE_FILE
# shellcheck disable=SC2154 # status is set inside the trap's own text
trap 'status=$?; print_stage_times "$([ $status = 0 ] && echo passed || echo "failed, exit $status")"; kill $(jobs -p) 2>/dev/null || true; rm -rf "$HPC_STAGE_FILE" "$HPC_JOBS" "$BINARIES"' EXIT
log "setup: the CLIs, emulators' packages, PostgreSQL and the previous release in the background (cached under $HPC_CACHE)"

go_tools() { ensure_tofu && ensure_local_provider; }
conformance_setup() { ensure_conformance_defs && ensure_conformance_venv; }
# The registry's doc tooling and TFLint, for tests/lint.rs (one after the other: cold, TFLint's build alone
# takes minutes of both cores).
lint_tools() { ensure_tfplugindocs && ensure_tflint; }
in_background go-tools go_tools
in_background terraform-oldest ensure_terraform_oldest
in_background moto ensure_moto
in_background kubernetes-validate ensure_kubernetes_validate
in_background crds ensure_crds
in_background lint-tools lint_tools
in_background vendor-definitions conformance_setup
in_background cargo-deny ensure_cargo_deny
in_background previous-release ensure_previous_provider
in_background slurm ensure_slurm
in_background slurm-24.11 ensure_slurm_24_11
in_background node-images ensure_node_images
in_background slurm-testing ensure_slurm_testing
HPC_TERRAFORM=$(find_terraform)
HPC_PG_BIN=$(ensure_postgres)

log "cargo fmt --check"
cargo fmt --all -- --check

log "cargo clippy -D warnings"
cargo clippy --quiet --workspace --all-targets -- -D warnings

log "build: every test target (debug)"
cargo test --workspace --lib --bins --tests --no-run --quiet --message-format=json-render-diagnostics >"$BINARIES"

log "setup finishing: waiting for what ran in the background"
{ read -r HPC_TOFU; read -r HPC_LOCAL_MIRROR; } < <(from_background go-tools)
HPC_TERRAFORM_OLDEST=$(from_background terraform-oldest)
HPC_MOTO_PYTHON=$(from_background moto)
HPC_KUBERNETES_VALIDATE=$(from_background kubernetes-validate)
HPC_CRDS=$(from_background crds)
{ read -r HPC_TFPLUGINDOCS; read -r HPC_TFLINT; } < <(from_background lint-tools)
{ read -r HPC_CONFORMANCE_DEFS; read -r HPC_CONFORMANCE_PYTHON; } < <(from_background vendor-definitions)
CARGO_DENY=$(from_background cargo-deny)
HPC_PREVIOUS_PROVIDER_DIR=$(from_background previous-release)
HPC_SLURM_VERSION=$(from_background slurm)
HPC_SLURM_24_11_ROOT=$(from_background slurm-24.11)
{ read -r HPC_IMAGE_DEBIAN_12; read -r HPC_IMAGE_DEBIAN_13; } < <(from_background node-images)
HPC_SLURM_TESTING_ROOT=$(from_background slurm-testing)
for tool in HPC_TOFU HPC_LOCAL_MIRROR HPC_TERRAFORM_OLDEST HPC_MOTO_PYTHON HPC_CONFORMANCE_DEFS HPC_CONFORMANCE_PYTHON CARGO_DENY HPC_PREVIOUS_PROVIDER_DIR HPC_SLURM_VERSION HPC_SLURM_24_11_ROOT HPC_KUBERNETES_VALIDATE HPC_CRDS HPC_TFPLUGINDOCS HPC_TFLINT HPC_IMAGE_DEBIAN_12 HPC_IMAGE_DEBIAN_13 HPC_SLURM_TESTING_ROOT; do
  [ -n "${!tool}" ] || { echo "setup gave no $tool" >&2; exit 1; }
done
# Every call the emulators receive is judged by the vendors' published definitions (notes/api-conformance.md);
# HPC_CONFORMANCE=off runs without the judge.
HPC_CONFORMANCE=${HPC_CONFORMANCE:-strict}
HPC_CONFORMANCE_LOG=${HPC_CONFORMANCE_LOG:-$(mktemp -d "${TMPDIR:-/tmp}/hpc-conformance.XXXXXX")}
export HPC_TOFU HPC_TERRAFORM HPC_TERRAFORM_OLDEST HPC_MOTO_PYTHON HPC_LOCAL_MIRROR HPC_PG_BIN HPC_PREVIOUS_PROVIDER_DIR HPC_SLURM_24_11_ROOT HPC_KUBERNETES_VALIDATE HPC_CRDS
export HPC_TFPLUGINDOCS HPC_TFLINT HPC_IMAGE_DEBIAN_12 HPC_IMAGE_DEBIAN_13 HPC_SLURM_TESTING_ROOT
export HPC_CONFORMANCE_DEFS HPC_CONFORMANCE_PYTHON HPC_CONFORMANCE HPC_CONFORMANCE_LOG

log "CLIs under test: every case with OpenTofu and the newest Terraform; a smoke set with the oldest supported"
"$HPC_TOFU" version 2>/dev/null | awk '/^OpenTofu v/ && !n {print; n=1}'
if [ -n "$HPC_TERRAFORM" ]; then "$HPC_TERRAFORM" version 2>/dev/null | awk '/^Terraform v/ && !n {print; n=1}'; else echo "Terraform 1.11 or later: absent (its cases are skipped)"; fi
echo "$("$HPC_TERRAFORM_OLDEST" version 2>/dev/null | awk '/^Terraform v/ && !n {print; n=1}') (oldest supported: smoke set)"
"$HPC_PG_BIN/postgres" --version
echo "Slurm: $HPC_SLURM_VERSION (Debian's slurmctld, slurmd and munge, run by tests/slurm on 127.0.0.1)"
echo "Slurm: $(chroot "$HPC_SLURM_24_11_ROOT" /usr/sbin/slurmctld -V) (Debian 13's, for topology/block: $HPC_SLURM_24_11_ROOT)"
echo "Slurm: $(chroot "$HPC_SLURM_TESTING_ROOT" /usr/sbin/slurmctld -V) (Debian testing's, for topology.yaml: $HPC_SLURM_TESTING_ROOT)"
echo "Host images (booted by the emulators' hosts, with systemd and cloud-init): $HPC_IMAGE_DEBIAN_12 ($(chroot "$HPC_IMAGE_DEBIAN_12" cloud-init --version 2>&1), $(chroot "$HPC_IMAGE_DEBIAN_12" slurmd -V)), $HPC_IMAGE_DEBIAN_13 ($(chroot "$HPC_IMAGE_DEBIAN_13" cloud-init --version 2>&1), $(chroot "$HPC_IMAGE_DEBIAN_13" slurmd -V))"

log "licences of everything linked (cargo deny)"
"$CARGO_DENY" check licenses 2>&1 | grep -v '^warning\|^ *[┌│━]\|^$' || true
"$CARGO_DENY" check licenses >/dev/null 2>&1

log "tests: unit, protocol, planner goldens, docs, contract, emulators, acceptance (OpenTofu and the newest Terraform; Terraform 1.0.3 smoke set) beside them, then the fault suite (tofu; every cloud: throttling, no capacity, 5xx bursts, slow APIs, provider killed, Ctrl-C)"
# Benches are left out on purpose: they print figures (./scripts/bench.sh) and never gate a build.
# The tests are confined: run_tests.py fails the run when the mode or owner of an entry directly under / or of
# /usr/lib differs after them; its self-check first proves that on a scratch directory (well under a second).
python3 scripts/run_tests.py --self-check
python3 scripts/run_tests.py "$BINARIES"

if [ "$HPC_CONFORMANCE" = strict ]; then
  log "conformance: every call judged by the vendors' definitions, every listed operation exercised"
  python3 scripts/conformance_report.py "$HPC_CONFORMANCE_LOG" notes/api-conformance.md "$HPC_CONFORMANCE_DEFS"
fi
