#!/usr/bin/env bash
# Runs the WAN bench (e2e TestBench_WAN) and prints its table: the VNC
# console at each quality and the RDP console, over LAN and two shaped
# links (40 ms / 20 Mbit/s / 0.5 % loss, 120 ms / 5 Mbit/s / 1 % loss),
# with Chromium in a network namespace behind a user-space link emulator.
# Needs root (network namespaces, TUN devices). It reports; it asserts no
# times. BENCH_WAN_SECONDS sets each workload's length (default 6);
# BENCH_WAN_CONSOLES, BENCH_WAN_QUALITIES and BENCH_WAN_PROFILES narrow it.
#
# Each profile runs in a go test of its own, with its own 20-minute
# timeout: a whole three-profile run on a loaded machine took more than
# one 20-minute test allowed (about 9 of its 15 rows), and a profile's
# rows are compared only with each other. A profile that fails is named
# and the others still run; the script then exits 1.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/assets.sh >/dev/null 2>&1 || { echo "bench-wan: scripts/assets.sh failed"; exit 1; }
failed=()
for profile in ${BENCH_WAN_PROFILES:-LAN 40ms 120ms}; do
	CORRAL_VDI_BENCH=1 CORRAL_VDI_BENCH_SECONDS="${BENCH_WAN_SECONDS:-6}" \
		CORRAL_VDI_BENCH_CONSOLES="${BENCH_WAN_CONSOLES:-}" CORRAL_VDI_BENCH_QUALITIES="${BENCH_WAN_QUALITIES:-}" \
		CORRAL_VDI_BENCH_PROFILES="$profile" \
		go test -count=1 -timeout 20m -run '^TestBench_WAN$' -v ./e2e/ 2>&1 |
		tee "${TMPDIR:-/tmp}/bench-wan.$$.log" | grep --line-buffered '^BENCH' | sed -u 's/^BENCH //'
	rc=${PIPESTATUS[0]}
	if [ "$rc" -ne 0 ]; then
		failed+=("$profile")
		echo "bench-wan: the $profile run failed (go test exit $rc); what the test said, then its last lines:"
		grep -E '^ +[a-z_]+_test\.go:[0-9]+: ' "${TMPDIR:-/tmp}/bench-wan.$$.log" | head -n 10
		grep -v '^BENCH' "${TMPDIR:-/tmp}/bench-wan.$$.log" | tail -n 20
	fi
	rm -f "${TMPDIR:-/tmp}/bench-wan.$$.log"
done
if [ "${#failed[@]}" -gt 0 ]; then
	echo "bench-wan: failed: ${failed[*]}"
	exit 1
fi
