#!/usr/bin/env bash
# Prints the provider's figures against the project's bars: process (handshake latency, peak RSS, binary
# size), planner time per cluster as node count grows, and the API calls a refresh costs on the AWS, Google Cloud, Azure and OCI emulators. Benchmarks report; they never fail a build.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
cargo bench --quiet --bench provider
cargo bench --quiet --bench planner
HPC_MOTO_PYTHON=$(ensure_moto) cargo bench --quiet --bench refresh
cargo bench --quiet --bench throttled
HPC_TOFU=$(ensure_tofu) cargo bench --quiet --bench cli
