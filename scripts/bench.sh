#!/usr/bin/env bash
# Runs the benchmarks and prints a report: each relay benchmark's MB/s as a
# ratio of raw loopback TCP measured in the same run on the same machine,
# and the other figures below (claims, dashboard, VNC opens, recording).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
go test -run '^$' -bench . -benchmem -count "${BENCH_COUNT:-3}" ./relay/ | tee "$out"
echo
echo "== report: throughput against raw TCP (same run) =="
awk '
	/^Benchmark/ {
		name = $1; sub(/-[0-9]+$/, "", name)
		for (i = 2; i <= NF; i++) if ($(i+1) == "MB/s") { sum[name] += $i; n[name]++ }
	}
	END {
		base = sum["BenchmarkRawTCP"] / n["BenchmarkRawTCP"]
		if (!base) { print "no BenchmarkRawTCP result"; exit 1 }
		for (k in sum) printf "%-24s %10.1f MB/s  %5.2fx raw TCP\n", k, sum[k] / n[k], (sum[k] / n[k]) / base
	}' "$out" | sort

echo
echo "== claims through vdi.Service: SQLite (local mode) and Kubernetes Leases (real apiserver) =="
bash scripts/testcluster.sh >/dev/null
go test -run '^$' -bench Claim -benchtime "${BENCH_CLAIMS:-500}x" ./vdi/leasetest/ ./kube/ | tee "$out"
awk '
	/^Benchmark/ {
		for (i = 2; i <= NF; i++) v[$(i+1)] = $i
		name = $1; sub(/-[0-9]+$/, "", name)
		printf "%-58s p50 %8.1f ms  p99 %8.1f ms  %8.1f claims/s  (%d members, %d claimants, %d portals)\n",
			name, v["p50-ms"], v["p99-ms"], v["claims/s"], v["members"], v["claimants"], v["portals"]
	}' "$out"

echo
echo "== admin dashboard: server time of GET /admin at 1,000 members (goal < 30 ms) =="
go test -run '^$' -bench AdminDashboard -benchtime "${BENCH_DASHBOARD:-30}x" -count "${BENCH_COUNT:-3}" ./handlers/ | tee "$out"
awk '/^BenchmarkAdminDashboard/ { for (i = 2; i <= NF; i++) { if ($(i+1) == "ms/op") { wall += $i; n++ } if ($(i+1) == "cpu-ms/op") cpu += $i } }
	END { if (n) printf "%-58s %8.1f ms/op wall  %8.1f ms/op CPU  (mean of %d runs)\n", "BenchmarkAdminDashboard", wall / n, cpu / n, n }' "$out"

echo
echo "== opening a KubeVirt VM's VNC console up to the RFB greeting: direct (VMI IP) vs the API server's vnc subresource (same run) =="
go test -run '^$' -bench VNCOpen -benchtime "${BENCH_OPENS:-100}x" -count "${BENCH_COUNT:-3}" ./kube/ | tee "$out"
awk '/^BenchmarkVNCOpen/ {
		name = $1; sub(/-[0-9]+$/, "", name); sub(/.*path=/, "", name)
		for (i = 2; i <= NF; i++) if ($(i+1) == "ns/op") { sum[name] += $i; n[name]++ }
	}
	END {
		if (!n["direct"] || !n["apiserver"]) { print "no VNCOpen result"; exit 1 }
		d = sum["direct"] / n["direct"] / 1e6; a = sum["apiserver"] / n["apiserver"] / 1e6
		printf "%-58s %8.2f ms/open\n", "direct (VMI IP)", d
		printf "%-58s %8.2f ms/open  %5.2fx direct\n", "apiserver (vnc subresource)", a, a / d
	}' "$out"

echo
echo "== session recording: a VNC session's portal CPU and bytes per minute, unrecorded vs recorded (same run, real Xvnc) =="
bash scripts/assets.sh >/dev/null 2>&1
CORRAL_VDI_BENCH=1 CORRAL_VDI_BENCH_SECONDS="${BENCH_RECORDING_SECONDS:-20}" go test -count=1 -run '^TestBench_RecordedVNC$' -v ./e2e/ | grep '^BENCH' | sed 's/^BENCH //'

echo
echo "== click \"Get a desktop\" → first desktop pixels in Chromium (Playwright, local desktops, a fresh claim each time): cold pool vs warm (standby 1), VNC and RDP (same run) =="
CORRAL_VDI_BENCH=1 CORRAL_VDI_BENCH_ROUNDS="${BENCH_FIRST_PIXEL_ROUNDS:-5}" go test -count=1 -run '^TestBench_FirstPixel$' -v ./e2e/ | grep '^BENCH' | sed 's/^BENCH //'
