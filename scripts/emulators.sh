#!/usr/bin/env bash
# Starts the cloud emulators on free 127.0.0.1 ports and writes their endpoints to a JSON file that tests,
# the demo and the examples read; `stop` ends them.
#
#   ./scripts/emulators.sh start [ENDPOINTS_FILE]   # default: $HPC_CACHE/run/endpoints.json
#   ./scripts/emulators.sh stop
#
# The emulators: AWS (moto + emulators/aws/hpc_moto.py), and ours for Google Cloud (Compute, Managed Lustre),
# Azure Resource Manager (HTTPS; trust azure_ca_pem) and OCI (Core, signatures verified).
# Every emulator serves the admin API in emulators/ADMIN-API.md.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
RUN="$HPC_CACHE/run"
mkdir -p "$RUN"

start() {
  local endpoints=${1:-$RUN/endpoints.json} python
  python=$(ensure_moto)
  (cd "$ROOT" && cargo build --quiet -p hpc-emulators --bin hpc-emulator)
  stop >/dev/null 2>&1 || true
  rm -f "$endpoints"
  setsid "$CARGO_TARGET_DIR/debug/hpc-emulator" start --python "$python" --endpoints "$endpoints" >"$RUN/emulators.log" 2>&1 &
  echo $! >"$RUN/emulators.pid"
  for _ in $(seq 1 300); do
    [ -s "$endpoints" ] && break
    sleep 0.1
  done
  [ -s "$endpoints" ] || { echo "the emulators did not start; see $RUN/emulators.log" >&2; cat "$RUN/emulators.log" >&2; exit 1; }
  log "$(head -1 "$RUN/emulators.log")"
  cat "$endpoints"
}

stop() {
  [ -f "$RUN/emulators.pid" ] || return 0
  kill -- -"$(cat "$RUN/emulators.pid")" 2>/dev/null || true
  rm -f "$RUN/emulators.pid"
}

case "${1:-}" in
  start) shift; start "$@" ;;
  stop) stop ;;
  *) echo "usage: $0 start [ENDPOINTS_FILE] | stop" >&2; exit 2 ;;
esac
