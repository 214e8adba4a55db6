#!/usr/bin/env bash
# Runs the WAN bench (e2e TestBench_WAN) and prints its table: the VNC
# console at each quality and the RDP console, over LAN and two shaped
# links (40 ms / 20 Mbit/s / 0.5 % loss, 120 ms / 5 Mbit/s / 1 % loss),
# with Chromium in a network namespace behind a user-space link emulator.
# Needs root (network namespaces, TUN devices). It reports; it asserts no
# times. BENCH_WAN_SECONDS sets each workload's length (default 6);
# BENCH_WAN_CONSOLES, BENCH_WAN_QUALITIES and BENCH_WAN_PROFILES narrow it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/assets.sh >/dev/null 2>&1
CORRAL_VDI_BENCH=1 CORRAL_VDI_BENCH_SECONDS="${BENCH_WAN_SECONDS:-6}" \
	CORRAL_VDI_BENCH_CONSOLES="${BENCH_WAN_CONSOLES:-}" CORRAL_VDI_BENCH_QUALITIES="${BENCH_WAN_QUALITIES:-}" \
	CORRAL_VDI_BENCH_PROFILES="${BENCH_WAN_PROFILES:-}" \
	go test -count=1 -timeout 20m -run '^TestBench_WAN$' -v ./e2e/ | grep '^BENCH' | sed 's/^BENCH //'
