#!/usr/bin/env bash
# Prints the provider's process figures (handshake latency, peak RSS, binary size) against the project's
# bars. A benchmark: it reports, it does not fail on a slow machine.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
cargo bench --quiet --bench provider
