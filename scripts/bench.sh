#!/usr/bin/env bash
# Runs the benchmarks and prints a report: the relay against a plain Go TCP
# relay and websockify, claim storms against their serial limit, and the
# other figures below (dashboard, VNC opens, recording). Every ratio is of
# figures measured in the same run on the same machine; benchmarks report,
# they never assert times. BENCH_COUNT runs of each (default 3).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
count=${BENCH_COUNT:-3}

echo "== relay: relay.Pipe behind relay.Upgrader vs a plain two-hop Go TCP relay and websockify, each in its own process =="
command -v websockify >/dev/null || echo "websockify is not installed: make test-deps (scripts/deps.sh --test) installs it"
go test -c -o "$out.relay" ./relay/
: >"$out"
for run in $(seq "$count"); do
	# One process per run, the three relays in a row for each figure, so
	# that their ratios share the machine's load of the moment.
	"$out.relay" -test.run '^$' -test.bench '^BenchmarkRelays$' | sed "s/^/run$run /" | tee -a "$out"
done
rm -f "$out.relay"
echo
awk '
	$2 ~ /^BenchmarkRelays\// {
		run = $1; split($2, p, "/"); what = p[2]; kind = p[3]; sub(/^relay=/, "", kind); sub(/-[0-9]+$/, "", kind); sub(/-[0-9]+$/, "", what)
		for (i = 3; i <= NF; i++) {
			if ($(i+1) == "MB/s") v[run, what, kind] = $i
			if ($(i+1) == "relay-cpu-us/MB") cpu[run, what, kind] = $i
			if ($(i+1) ~ /-p99-us$/) { k = $(i+1); sub(/-p99-us$/, "", k); v[run, "echo", k] = $i }
			if ($(i+1) == "KiB/session") v[run, what, kind] = $i
		}
		runs[run] = 1; if (kind != "") kinds[kind] = 1
	}
	function row(label, what, unit, tab, prec,    r, k, n, s, lo, hi, x, line) {
		line = sprintf("%-30s", label)
		for (k in kinds) { s[k] = 0; n[k] = 0 }
		for (r in runs) for (k in kinds) if ((r, what, k) in tab) { s[k] += tab[r, what, k]; n[k]++ }
		foreach = "tcp portal websockify"
		split(foreach, order, " ")
		for (x = 1; x <= 3; x++) { k = order[x]; if (n[k]) line = line sprintf("  %s %" prec " %s", k, s[k] / n[k], unit) }
		for (x = 1; x <= 3; x += 2) {
			k = order[x]; lo = ""; hi = ""
			for (r in runs) if ((r, what, "portal") in tab && (r, what, k) in tab && tab[r, what, k] > 0) {
				q = tab[r, what, "portal"] / tab[r, what, k]
				if (lo == "" || q < lo) lo = q
				if (hi == "" || q > hi) hi = q
			}
			if (lo != "") line = line sprintf("  portal/%s %.2f-%.2fx", k, lo, hi)
		}
		print line
	}
	END {
		n = 0; for (r in runs) n++
		printf "means of %d runs; portal/x is the range of the per-run ratios\n", n
		row("throughput desktop->client", "out", "MB/s", v, ".0f")
		row("throughput client->desktop", "in", "MB/s", v, ".0f")
		row("relay CPU desktop->client", "out", "us/MB", cpu, ".0f")
		row("relay CPU client->desktop", "in", "us/MB", cpu, ".0f")
		row("echo p99, 200 sessions", "echo", "us", v, ".0f")
		row("memory per idle session", "idle", "KiB", v, ".1f")
	}' "$out"
echo
echo "== relay in one process (no second hop): each benchmark's MB/s against raw loopback TCP (same run) =="
go test -run '^$' -bench '^Benchmark(Relay|RelayOut|RelayOutRecorded|RawTCP)$' -benchmem -count "$count" ./relay/ | tee "$out"
echo
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
echo "== claim storm through vdi.Service, 3 portals, 200 members: SQLite and PostgreSQL (local mode) and Kubernetes Leases (real apiserver) =="
echo "limit: claimants / the single claimant's claims per second in the same run; p99/limit is the goal's ratio (<= 3); writes and lost races per claim (goals 1 and <= 0.2)"
bash scripts/testcluster.sh >/dev/null
: >"$out"
for run in $(seq "$count"); do
	go test -run '^$' -bench '^BenchmarkSQLiteClaim$' -benchtime "${BENCH_CLAIMS:-1000}x" ./vdi/leasetest/ | sed "s/^/run$run /" | tee -a "$out"
	go test -run '^$' -bench '^BenchmarkPostgresClaim$' -benchtime "${BENCH_PG_CLAIMS:-600}x" ./vdi/leasetest/ | sed "s/^/run$run /" | tee -a "$out"
	go test -run '^$' -bench '^BenchmarkKubeClaim$' -benchtime "${BENCH_KUBE_CLAIMS:-400}x" ./kube/ | sed "s/^/run$run /" | tee -a "$out"
done
echo
awk '
	$2 ~ /^Benchmark(SQLite|Postgres|Kube)Claim\// {
		delete v
		for (i = 3; i <= NF; i++) v[$(i+1)] = $i
		name = $2; sub(/-[0-9]+$/, "", name); sub(/^Benchmark/, "", name); sub(/Claim\/members=200\/claimants=/, " ", name)
		if (!(name in n)) order[++names] = name
		n[name]++; p50[name] += v["p50-ms"]; p99[name] += v["p99-ms"]; lim[name] += v["limit-ms"]
		wr[name] += v["writes/claim"]; lost[name] += v["lost/claim"]
		if ("p99/limit" in v) {
			r = v["p99/limit"]
			if (!(name in lo) || r < lo[name]) lo[name] = r
			if (!(name in hi) || r > hi[name]) hi[name] = r
		}
		if (v["won/claim"] < 1) short[name] = 1
	}
	END {
		printf "%-20s %8s %8s %8s %8s %10s  %s\n", "backend claimants", "writes", "lost", "p50 ms", "p99 ms", "limit ms", "p99/limit (range over runs)"
		for (i = 1; i <= names; i++) {
			k = order[i]
			line = sprintf("%-20s %8.2f %8.2f %8.1f %8.1f", k, wr[k] / n[k], lost[k] / n[k], p50[k] / n[k], p99[k] / n[k])
			if (k in lo) line = line sprintf(" %10.1f  %.2f-%.2fx", lim[k] / n[k], lo[k], hi[k])
			if (k in short) line = line "  (some claimants got no desktop)"
			print line
		}
	}' "$out"
echo
echo "== kube backend: API-server requests per claim, release, page view and console open, and the API server's CPU per 1,000 claims, read from the API server (cache=off) and from the backend's caches (cache=on), same run =="
go test -count=1 -run '^$' -bench '^BenchmarkKubeRequests$' -benchtime "${BENCH_KUBE_REQUESTS:-5}x" ./kube/ | tee "$out"
awk '
	$1 ~ /^BenchmarkKubeRequests\// {
		split($1, p, "/"); cache = p[2]; sub(/^cache=/, "", cache); what = p[3] "/" p[4]; sub(/-[0-9]+$/, "", what); sub(/kind=/, "", what); sub(/warm=true/, "warm", what); sub(/warm=false/, "cold", what)
		for (i = 2; i <= NF; i++) {
			if ($(i+1) ~ /^requests\//) { k = $(i+1); sub(/^requests\//, "", k); v[what, k, cache] = $i; kinds[what] = 1 }
			if ($(i+1) == "apiserver-cpu-s/1k-claims") v[what, "cpu", cache] = $i
		}
	}
	function line(label, what, k) {
		if (!((what, k, "off") in v)) return
		s = sprintf("%-44s %6.1f", label, v[what, k, "off"])
		if ((what, k, "on") in v) s = s sprintf(" -> %6.1f", v[what, k, "on"])
		print s
	}
	END {
		printf "%-44s %6s    %6s\n", "API-server requests (mean)", "off", "on"
		split("vm/cold vm/warm ct/cold ct/warm", ks, " ")
		for (x = 1; x <= 4; x++) line("requests per claim (" ks[x] "):", ks[x], "claim")
		for (x = 1; x <= 4; x++) line("API server CPU-s per 1,000 claims (" ks[x] "):", ks[x], "cpu")
		line("requests per release (vm):", "vm/cold", "release")
		line("requests per release (ct):", "ct/cold", "release")
		line("requests per page view (home, vm):", "vm/cold", "page")
		line("requests per page view (dashboard, vm):", "vm/cold", "dashboard")
		line("requests per console open (vm, direct path):", "vm/warm", "console-open")
	}' "$out"
echo
echo "== kube backend: the admin dashboard of a 1,000-member CT pool from the caches (vdi.Service.Dashboard; goal 0 requests) =="
go test -count=1 -run '^$' -bench '^BenchmarkKubeDashboard$' -benchtime "${BENCH_DASHBOARD:-30}x" ./kube/ | grep '^BenchmarkKubeDashboard'
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
echo "== one desktop, many viewers (rfb.Hub, real Xvnc): the holder's keypress -> changed pixels with 0, 1 and 10 viewers and one viewer at 1 Mbit/s, against a direct connection (same run) =="
go test -run '^$' -bench '^BenchmarkHub_KeyToPixels$' -benchtime 200x -count "$count" ./rfb/ | tee "$out"
awk '
	/^BenchmarkHub_KeyToPixels\// {
		name = $1; sub(/^BenchmarkHub_KeyToPixels\//, "", name); sub(/-[0-9]+$/, "", name)
		for (i = 2; i <= NF; i++) {
			if ($(i+1) == "median-us") { med[name] += $i; n[name]++ }
			if ($(i+1) == "p95-us") p95[name] += $i
			if ($(i+1) == "heap-KiB/viewer") heap[name] += $i
		}
	}
	END {
		base = med["viewers=0"] / n["viewers=0"]
		for (k in med) printf "%-22s median %7.2f ms  p95 %7.2f ms  %5.2fx the holder alone%s\n", k, med[k] / n[k] / 1000, p95[k] / n[k] / 1000, (med[k] / n[k]) / base, (k in heap) ? sprintf("  heap %6.0f KiB/viewer", heap[k] / n[k]) : ""
	}' "$out" | sort

echo
echo "== one screen per desktop across replicas (console.Screens, real Xvnc): the holder's keypress (x, BackSpace) -> changed pixels from a client on the screen's owner and from one on another replica over a screen link on loopback, key by key in turn (same run; goal: relayed <= 1.2x the owner) =="
go test -run '^$' -bench '^BenchmarkScreens_KeyToPixels$' -benchtime 100x -count "$count" ./console/ | tee "$out"
awk '
	/^BenchmarkScreens_KeyToPixels/ {
		for (i = 2; i <= NF; i++) {
			if ($(i+1) == "owner-median-us") o += $i
			if ($(i+1) == "relayed-median-us") r += $i
			if ($(i+1) == "relayed/owner") { q = $i; if (lo == "" || q < lo) lo = q; if (hi == "" || q > hi) hi = q }
		}
		n++
	}
	END {
		if (!n) { print "no BenchmarkScreens_KeyToPixels result"; exit 1 }
		printf "%-22s median %7.2f ms/key\n%-22s median %7.2f ms/key  relayed/owner %.2f-%.2fx (range over %d runs)\n", "on the owner", o / n / 1000, "relayed", r / n / 1000, lo, hi, n
	}' "$out"

echo
echo "== one screen per desktop across replicas: upstream connections of one desktop while 50 clients join and leave at random across 3 replicas (console.Screens, real Xvnc; goal: never above 1) =="
go test -run '^$' -bench '^BenchmarkScreens_JoinLeaveStorm$' -benchtime 5x -count "$count" ./console/ | tee "$out"
awk '
	/^BenchmarkScreens_JoinLeaveStorm/ {
		for (i = 2; i <= NF; i++) {
			if ($(i+1) == "peak-upstreams" && $i > peak) peak = $i
			if ($(i+1) == "upstreams/storm") opened += $i
			if ($(i+1) == "failed-clients/storm") failed += $i
		}
		n++
	}
	END {
		if (!n) { print "no BenchmarkScreens_JoinLeaveStorm result"; exit 1 }
		printf "%-22s at most %d open at once  %5.1f opened one after another a storm  %4.1f clients a storm got no screen  (%d runs)\n", "upstreams", peak, opened / n, failed / n, n
	}' "$out"

echo
echo "== one screen per desktop across replicas: a viewer's first pixels after the screen owner's SIGKILL (3 portal processes, kube backend, the VMI's vnc through the API server; goal: median <= 5 s) =="
CORRAL_VDI_BENCH=1 CORRAL_VDI_BENCH_ROUNDS="${BENCH_FAILOVER_ROUNDS:-5}" go test -count=1 -run '^TestBench_HAFailover$' -v ./e2e/ | grep '^BENCH' | sed 's/^BENCH //'

echo
echo "== the hub's garbage: a viewer on a real Xvnc asking one 64x64 tile at a time (as the soak's sessions do), Raw: bytes and allocations per tile, the hub and the test client together =="
go test -run '^$' -bench '^BenchmarkHub_TileRequests$' -benchmem -count "$count" ./rfb/ | tee "$out"
awk '/^BenchmarkHub_TileRequests/ { b += $5; a += $7; n++ } END { if (!n) { print "no TileRequests result"; exit 1 } printf "%-22s %8.1f KiB/tile  %5.1f allocs/tile\n", "64x64 tile, Raw", b / n / 1024, a / n }' "$out"

# encodeTable runs rfb benchmark $1 (one full update for each client) and
# prints each client's bytes a frame and time to encode, both as ratios to
# ZRLE's in the same run.
encodeTable() {
	go test -run '^$' -bench "^$1\$" -benchtime 20x -count "$count" ./rfb/ | tee "$out"
	awk -v bench="$1" '
		index($1, bench "/") == 1 {
			name = substr($1, length(bench) + 2); sub(/-[0-9]+$/, "", name)
			ms[name] += $3 / 1e6; n[name]++
			for (i = 4; i <= NF; i++) if ($(i+1) == "KiB/frame") kib[name] += $i
		}
		END { for (k in ms) printf "%-12s %8.1f KiB a frame  %6.1f ms to encode  %5.3fx the bytes, %5.2fx the time of ZRLE\n", k, kib[k] / n[k], ms[k] / n[k], kib[k] / kib["zrle"], (ms[k] / n[k]) / (ms["zrle"] / n["zrle"]) }' "$out" | sort
}

echo
echo "== a photo-like frame through the hub: 1280x800, half photo, half text; ZRLE alone vs Tight JPEG at the Picture choice's levels (Sharp 8, Fast 3) =="
encodeTable BenchmarkEncodePhoto

echo
echo "== a real desktop's first screen (1280x800, its window manager and terminal) as each encoding a browser may take: ZRLE, and Tight as noVNC gets it (lists Tight first), with and without JPEG on =="
encodeTable BenchmarkEncodeDesktop

echo
echo "== the H.264 encoder's bytes a second at its hub's two paces: churn (a 1280x800 screen of noise, new each frame) through an encoder told 30 and one told 60 screens a second, as the hub tells it (goal: h264Bitrate's 4000 kbit/s at either) =="
go test -run '^$' -bench '^BenchmarkEncoder_Pace$' -benchtime 60x -count "$count" ./rfb/ | tee "$out"
awk '
	/^BenchmarkEncoder_Pace\// {
		name = $1; sub(/^BenchmarkEncoder_Pace\//, "", name); sub(/-[0-9]+$/, "", name)
		ms[name] += $3 / 1e6; n[name]++
		for (i = 4; i <= NF; i++) { if ($(i+1) == "kbit/s") kbit[name] += $i; if ($(i+1) == "KiB/frame") kib[name] += $i }
	}
	END {
		if (!length(n)) { print "no BenchmarkEncoder_Pace result"; exit 1 }
		for (k in n) printf "%-8s %6.0f kbit/s  %6.1f KiB a frame  %6.1f ms to encode a frame\n", k, kbit[k] / n[k], kib[k] / n[k], ms[k] / n[k]
	}' "$out" | sort

echo
echo "== one desktop's video, 1 and 10 H.264 viewers (Go RFB clients on the console websocket, a video over the whole 1280x800 desktop, phases 1, 10, 1 in turn): frames a second each viewer got, the encoder's and the portal's CPU (goal: 10 viewers <= 1.3x one), one encoder whoever watches =="
CORRAL_VDI_BENCH=1 CORRAL_VDI_BENCH_SECONDS="${BENCH_VIEWERS_SECONDS:-10}" CORRAL_VDI_BENCH_ROUNDS="${BENCH_VIEWERS_ROUNDS:-1}" go test -count=1 -run '^TestBench_Viewers$' -v ./e2e/ | grep '^BENCH' | sed 's/^BENCH //'

echo
echo "== session recording: a VNC session's portal CPU and bytes per minute, unrecorded vs recorded (same run, real Xvnc) =="
bash scripts/assets.sh >/dev/null 2>&1
CORRAL_VDI_BENCH=1 CORRAL_VDI_BENCH_SECONDS="${BENCH_RECORDING_SECONDS:-20}" go test -count=1 -run '^TestBench_RecordedVNC$' -v ./e2e/ | grep '^BENCH' | sed 's/^BENCH //'

echo
echo "== sound: one desktop's audio websocket while a tone plays, 1 and 4 listeners: bytes, the portal's CPU and the encoders' inside the desktop (real PulseAudio + GStreamer) =="
CORRAL_VDI_BENCH=1 CORRAL_VDI_BENCH_SECONDS="${BENCH_AUDIO_SECONDS:-10}" go test -count=1 -run '^TestBench_Audio$' -v ./e2e/ | grep '^BENCH' | sed 's/^BENCH //'
echo

echo "== an idle console in Chromium: bytes per minute each way at rest, VNC at common window sizes and device pixel ratios, then the whole page of each console (goal: keepalives, <= 4 KiB/min) =="
CORRAL_VDI_BENCH=1 CORRAL_VDI_BENCH_SECONDS="${BENCH_IDLE_SECONDS:-20}" go test -count=1 -run '^TestBench_IdleConsole$' -v ./e2e/ | grep '^BENCH' | sed 's/^BENCH //'
echo

echo "== click \"Get a desktop\" → first desktop pixels in Chromium (Playwright, local desktops, a fresh claim each time): cold pool vs warm (standby 1), VNC and RDP (same run) =="
CORRAL_VDI_BENCH=1 CORRAL_VDI_BENCH_ROUNDS="${BENCH_FIRST_PIXEL_ROUNDS:-5}" go test -count=1 -run '^TestBench_FirstPixel$' -v ./e2e/ | grep '^BENCH' | sed 's/^BENCH //'

echo
echo "== the agent seat (agent/, real Xvnc through a screen hub): screenshot time, bytes and CPU, full 1280x800 and scaled to 1024 wide, of an unchanged screen (the cache: no encode) and a changed one (goal <= 50 ms); input -> changed screen; CPU per agent at 2 screenshots/s =="
go test -count=1 -run '^$' -bench '^BenchmarkSeat_' -benchtime "${BENCH_AGENT:-20}x" ./agent/ | grep '^BenchmarkSeat_'
echo
echo "== consoles over shaped networks (make bench-wan): keypress → pixels, fps, bytes and CPU per workload, idle bytes; VNC per quality and RDP =="
bash scripts/bench-wan.sh
