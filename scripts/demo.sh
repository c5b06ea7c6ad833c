#!/usr/bin/env bash
# The main job: release the provider (scripts/release.sh --demo: a release build, the zip, SHA256SUMS and
# their GPG signature by a throwaway demo key), serve the release on 127.0.0.1 over HTTPS as a provider
# registry (scripts/registry.py), start the cloud emulators on 127.0.0.1, and drive examples/quickstart (a
# 2-node p5.48xlarge cluster with its fabric and FSx for Lustre, through modules/training-cluster) with
# OpenTofu the way a user would: `tofu init` installs the pinned version from the registry and checks it
# against the signed SHA256SUMS, then plan, apply, the outputs a job needs (nodes, hostfile, mount command,
# NCCL environment), re-plan (nothing to do), a node terminated behind the tool's back (the plan shows it;
# apply restores it), a mistake caught at plan time, destroy (the emulator's inventory is empty). Then from
# the cluster to Slurm: examples/slurm/aws applied, its controller, login node and two GPU nodes booted from
# their own user data (systemd and cloud-init against the emulator's metadata service), sinfo and a job run to
# COMPLETED on the login node, destroy. Installs what it needs. HPC_PROVIDER_DIR=<dir> releases the provider
# binary already built there instead of making a release build.
#
# The example has no endpoint in it: like any AWS tool, the provider follows AWS_ENDPOINT_URL and the
# standard credential chain, so the same files run against real AWS when those are left out.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

TOFU=$(ensure_tofu)
VERSION=$(cargo_version)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/hpc-demo.XXXXXX")
ENDPOINTS="$WORK/endpoints.json"
REGISTRY_PID=""
trap '[ -z "$REGISTRY_PID" ] || kill "$REGISTRY_PID" 2>/dev/null; "$ROOT/scripts/emulators.sh" stop >/dev/null 2>&1; rm -rf "$WORK"' EXIT
cp -r examples modules "$WORK/"

log "scripts/release.sh: terraform-provider-hpc $VERSION as the registry publishes it"
if [ -n "${HPC_PROVIDER_DIR:-}" ]; then export HPC_RELEASE_BINARY="$HPC_PROVIDER_DIR/terraform-provider-hpc"; fi
# A demo release: signed with the throwaway key scripts/lib.sh makes (ensure_release_key), and it says so.
"$ROOT/scripts/release.sh" --demo --out "$WORK/dist" | grep -v ': not built: ' | sed 's/^/  /'
echo "  (the other platforms the registry carries are not built here: scripts/release.sh says why for each)"

TLS=$(ensure_registry_cert)
# The CLI trusts the machine's CAs and the local registry's (the Go TLS stack reads SSL_CERT_FILE).
cat /etc/ssl/certs/ca-certificates.crt "$TLS/ca.pem" >"$WORK/ca-bundle.pem" 2>/dev/null || cp "$TLS/ca.pem" "$WORK/ca-bundle.pem"
export SSL_CERT_FILE="$WORK/ca-bundle.pem"
python3 "$ROOT/scripts/registry.py" "$WORK/dist" --cert "$TLS/cert.pem" --key "$TLS/key.pem" >"$WORK/registry.url" 2>"$WORK/registry.log" &
REGISTRY_PID=$!
for _ in $(seq 300); do
  [ -s "$WORK/registry.url" ] || ! kill -0 "$REGISTRY_PID" 2>/dev/null && break
  sleep 0.1
done
REGISTRY=$(head -n 1 "$WORK/registry.url")
[ -n "$REGISTRY" ] || { cat "$WORK/registry.log" >&2; echo "scripts/registry.py did not start" >&2; exit 1; }
log "the release served at $REGISTRY (scripts/registry.py: the provider registry protocol over HTTPS)"
# registry.opentofu.org's provider registry, answered by the local one: `source = "hpc-platform/hpc"`
# installs from it. No dev_overrides: what runs is what `tofu init` installed and verified.
cat >"$WORK/cli.tfrc" <<HCL
host "registry.opentofu.org" {
  services = {
    "providers.v1" = "$REGISTRY/v1/providers/"
  }
}
HCL
export TF_CLI_CONFIG_FILE="$WORK/cli.tfrc"
sed 's/^/  /' "$WORK/cli.tfrc"

# The emulators judge every call by the vendors' published definitions (notes/api-conformance.md).
HPC_CONFORMANCE=${HPC_CONFORMANCE:-strict}
HPC_CONFORMANCE_DEFS=$(ensure_conformance_defs)
HPC_CONFORMANCE_LOG="$WORK/conformance"
export HPC_CONFORMANCE HPC_CONFORMANCE_DEFS HPC_CONFORMANCE_LOG
log "starting the cloud emulators on 127.0.0.1 (calls judged by the vendors' definitions: HPC_CONFORMANCE=$HPC_CONFORMANCE)"
"$ROOT/scripts/emulators.sh" start "$ENDPOINTS" >/dev/null
AWS_ENDPOINT_URL=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["aws"])' "$ENDPOINTS")
export AWS_ENDPOINT_URL AWS_ACCESS_KEY_ID=demo AWS_SECRET_ACCESS_KEY=demo
log "AWS API (moto + our extension) at $AWS_ENDPOINT_URL"
admin() { # <method> <route> [json]
  python3 - "$AWS_ENDPOINT_URL" "$@" <<'PY'
import json, sys, urllib.request
url, method, route = sys.argv[1:4]
body = sys.argv[4].encode() if len(sys.argv) > 4 else None
req = urllib.request.Request(f"{url}/_admin/{route}", data=body, method=method, headers={"Content-Type": "application/json"})
print(urllib.request.urlopen(req).read().decode())
PY
}

# From the cluster to Slurm: examples/slurm/aws applied, its hosts booted from their own user data (Debian 12
# images with systemd and cloud-init, against the emulator's instance metadata service), sinfo, and a job on
# the GPU nodes, seen from the login node as a user there sees it.
slurm_demo() {
  local images image emulator boot_out boot_in boot_pid line pid login job
  log "Slurm: examples/slurm/aws (a controller, a login node, GPU clusters of 2 and 2 nodes)"
  images=$(ensure_node_images)
  image=$(sed -n 1p <<<"$images")
  (cd "$ROOT" && cargo build --quiet -p hpc-emulators --bin hpc-emulator)
  emulator="$CARGO_TARGET_DIR/debug/hpc-emulator"
  cd "$WORK/examples/slurm/aws"
  # This machine is not a p5.48xlarge: Slurm's own setting for testing (config_overrides) takes the configured
  # CPUs and memory instead of refusing the nodes (emulators/hosts/STAND-INS.md). A real cluster leaves it out.
  cat >demo_override.tf <<'HCL'
resource "hpc_slurm_cluster" "ml" {
  custom_settings = { SlurmdParameters = "config_overrides" }
}
HCL
  "$TOFU" init -input=false -no-color >/dev/null
  "$TOFU" apply -input=false -auto-approve -no-color -var train_nodes=2 -var slurm_version=22.05 | grep -E 'Apply complete'
  "$TOFU" output -raw login | sed 's/^/  login: /'
  echo
  log "booting the controller, the login node and train-0, train-1 from their user data (hpc-emulator boot)"
  boot_out=$WORK/boot.out
  mkfifo "$WORK/boot.in"
  "$emulator" boot --endpoints "$ENDPOINTS" --cloud aws --network 10.0.0.0/16 --image "$image" \
    ml-controller ml-login0 train-0+gpus train-1+gpus <"$WORK/boot.in" >"$boot_out" 2>"$WORK/boot.log" &
  boot_pid=$!
  exec {boot_in}>"$WORK/boot.in"
  for _ in $(seq 900); do
    grep -q '^ALL READY' "$boot_out" 2>/dev/null && break
    sleep 1
  done
  grep -q '^ALL READY' "$boot_out" || { cat "$WORK/boot.log" >&2; echo "the hosts did not boot" >&2; exit 1; }
  while read -r line; do echo "  $line"; done < <(grep '^READY' "$boot_out")
  pid=$(awk '$2 == "ml-controller" {print $3}' "$boot_out")
  login=$(awk '$2 == "ml-login0" {print $3}' "$boot_out")
  on() { local host=$1; shift; nsenter -t "$host" -a -r -w -- /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
  echo "  the controller's setup: $(on "$pid" grep -h 'HPC SLURM READY' /var/log/hpc-slurm-setup.log)"
  log "on the login node, as its user (debian): sinfo"
  on "$login" runuser -u debian -- sinfo | sed 's/^/  /'
  log "on the login node: sbatch --wait -N 2 -p h100 --wrap 'srun hostname'"
  job=$(on "$login" timeout 300 runuser -u debian -- sh -c 'cd /tmp && sbatch --wait --parsable -N 2 -p h100 -w train-[0-1] --wrap "srun hostname"') ||
    { echo "the job did not end in 300 s" >&2; on "$login" sinfo -N -l >&2; exit 1; }
  on "$login" scontrol show job "$job" | grep -oE 'JobId=[0-9]+|JobState=[A-Z]+|(^| )NodeList=[^ ]+|ExitCode=[0-9:]+' | sed 's/^ //' | tr '\n' ' ' | sed 's/^/  /'
  echo
  # Its stdin closed, hpc-emulator stops the hosts and exits (a bare `wait` would wait for the registry too).
  exec {boot_in}>&-
  wait "$boot_pid"
  log "tofu destroy (examples/slurm/aws)"
  "$TOFU" destroy -input=false -auto-approve -no-color -var train_nodes=2 -var slurm_version=22.05 | grep -E 'Destroy complete'
  admin GET inventory | python3 -c 'import json,sys; print("  empty:", json.load(sys.stdin)["empty"])'
  cd "$WORK"
}

cd "$WORK/examples/quickstart"
grep -qE "^ +version += +\"$VERSION\"" main.tf ||
  { echo "examples/quickstart/main.tf does not pin hpc-platform/hpc to version $VERSION (Cargo.toml's)" >&2; exit 1; }
log "$("$TOFU" version 2>/dev/null | awk '/^OpenTofu v/ && !n {print; n=1}') init: examples/quickstart pins hpc-platform/hpc to version $VERSION"
"$TOFU" init -input=false -no-color | grep -E '^- |signed by'
echo "the lock file records the version and the checksums to hold every later init to:"
sed -n '/^provider "registry.opentofu.org\/hpc-platform\/hpc"/,/^}/p' .terraform.lock.hcl | sed 's/^/  /'
log "tofu plan: the module's fabric, cluster and filesystem, and every vendor piece they become"
"$TOFU" plan -input=false -no-color | sed -n '/will perform/,$p' | grep -E "^  # |kind *=|estimated_hourly_cost_usd|^Plan:"
log "tofu apply (TF_LOG_PROVIDER=debug, the provider's log kept in a file)"
TF_LOG_PROVIDER=debug TF_LOG_PATH="$WORK/apply.log" "$TOFU" apply -input=false -auto-approve -no-color | grep -E 'Creation complete|Apply complete'
log "the provider's log of that apply: one debug line per cloud request, progress at info"
# Lines as the CLI writes them: `<time> [DEBUG] provider.terraform-provider-hpc_v<version>: aws RunInstances: ...`.
python3 - "$WORK/apply.log" <<'PY'
import collections, re, sys
requests, progress = collections.Counter(), []
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"\[(DEBUG|INFO)\]\s+provider\.terraform-provider-hpc[^:]*: (.*)", line)
    if not m:
        continue
    level, text = m.groups()
    r = re.match(r"aws (\w+): HTTP \d+", text)
    if level == "DEBUG" and r:
        requests[r.group(1)] += 1
    elif level == "INFO" and "nodes running" in text:
        progress.append(text.split(": ", 1)[0] + ": " + text.split(": ", 2)[1])
print("  %d AWS requests: %s" % (sum(requests.values()), ", ".join("%s x%d" % kv for kv in sorted(requests.items()))))
for p in progress:
    print("  progress: " + p)
PY
log "what a training job needs, from the outputs"
"$TOFU" output -no-color node_private_ips
echo "hostfile:"
"$TOFU" output -raw hostfile | sed 's/^/  /'
echo
"$TOFU" output -raw mount_command | sed 's/^/mount: /'
echo
"$TOFU" output -no-color nccl_environment
log "what the emulator now holds"
admin GET inventory | python3 -c '
import json, sys
inv = json.load(sys.stdin)["resources"]
for i in inv["ec2"]["instances"]:
    print("  %s: %s %s %s in placement group %s" % (i["tags"].get("hpc:node"), i["id"], i["type"], i["state"], i["placement_group"]))
print("  file systems:", ", ".join(inv["fsx"]["file_systems"]))'
log "tofu plan -detailed-exitcode after apply (expect: no changes, exit 0)"
"$TOFU" plan -input=false -detailed-exitcode -no-color | tail -3

NODE=$(admin GET inventory | python3 -c 'import json,sys; print([i["id"] for i in json.load(sys.stdin)["resources"]["ec2"]["instances"] if i["tags"].get("hpc:node") == "train-1"][0])')
log "drift: node train-1 ($NODE) is terminated outside the tool"
admin POST out-of-band "{\"action\": \"terminate_instance\", \"id\": \"$NODE\"}" >/dev/null
log "tofu plan shows it (exit 2) and plans the repair"
set +e
"$TOFU" plan -input=false -detailed-exitcode -no-color | sed -n '/will perform/,/^Plan:/p' | grep -E '^  # |node_count|"train-1"|^Plan:'
echo "  exit code: ${PIPESTATUS[0]}"
set -e
log "tofu apply restores the node (a new instance; EC2 may give it the address its predecessor freed)"
"$TOFU" apply -input=false -auto-approve -no-color | grep -E 'Modifications complete|Apply complete'
"$TOFU" output -raw hostfile | sed 's/^/  /'
NEW=$(admin GET inventory | python3 -c 'import json,sys; print([i["id"] for i in json.load(sys.stdin)["resources"]["ec2"]["instances"] if i["tags"].get("hpc:node") == "train-1" and i.get("state") != "terminated"][0])')
echo "  train-1 is now $NEW (was $NODE)"
"$TOFU" plan -input=false -detailed-exitcode -no-color | tail -1

log "a mistake caught at plan time: a GPU model that cloud does not offer"
"$TOFU" plan -input=false -no-color -var gpu=H900 2>&1 | sed -n '/Error:/,$p' || true

log "tofu destroy"
"$TOFU" destroy -input=false -auto-approve -no-color | grep -E 'Destroy complete'
log "the emulator's inventory after destroy"
admin GET inventory | python3 -c 'import json,sys; print("  empty:", json.load(sys.stdin)["empty"])'
slurm_demo

if [ "$HPC_CONFORMANCE" = strict ]; then
  log "every call judged by botocore's EC2 and FSx models"
  python3 "$ROOT/scripts/conformance_report.py" --violations "$HPC_CONFORMANCE_LOG" "$ROOT/notes/api-conformance.md" "$HPC_CONFORMANCE_DEFS" | sed 's/^/  /'
fi
log "done"
