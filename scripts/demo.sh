#!/usr/bin/env bash
# The main job: build the provider, then drive it with OpenTofu the way a user would: plan, apply, show
# the outputs, re-plan (nothing to do), destroy. Installs OpenTofu on first use.
#
# Until the cloud clients and emulators land (issues #4-#8) a cluster can be planned but not applied: the demo
# plans the 4-node AWS example (the full vendor expansion), then runs the catalog quickstart, which needs
# no cloud, through plan, apply, re-plan and destroy. The emulator walkthrough (apply, out-of-band drift,
# destroy) replaces it then.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

TOFU=$(ensure_tofu)
PROVIDER_DIR=$(build_provider)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/hpc-demo.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cp -r examples modules "$WORK/"
write_cli_config "$WORK/cli.tfrc" "$PROVIDER_DIR"
export TF_CLI_CONFIG_FILE="$WORK/cli.tfrc"
log "$("$TOFU" version 2>/dev/null | awk '/^OpenTofu v/ && !n {print; n=1}') with terraform-provider-hpc from $PROVIDER_DIR"

log "tofu plan: a 4-node p5.48xlarge cluster with fabric and FSx for Lustre (examples/aws)"
(cd "$WORK/examples/aws" && "$TOFU" plan -input=false -no-color | sed -n '/will perform/,$p')

cd "$WORK/examples/quickstart"

log "tofu plan"
"$TOFU" plan -input=false -var gpu=H100
log "tofu apply"
"$TOFU" apply -input=false -auto-approve -var gpu=H100
log "tofu output (JSON)"
"$TOFU" output -json instance_types
log "tofu plan -detailed-exitcode after apply (expect: no changes, exit 0)"
"$TOFU" plan -input=false -detailed-exitcode -var gpu=H100
log "a mistake caught at plan time: a GPU model that cloud does not offer"
if "$TOFU" plan -input=false -var gpu=H900 2>&1 | sed -n '/Error:/,$p'; then :; fi
log "tofu destroy"
"$TOFU" destroy -input=false -auto-approve -var gpu=H100
log "done"
