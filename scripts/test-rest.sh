#!/usr/bin/env bash
# The second stage of make test: every package not run with the race
# detector. One package's tests run one after another, and the e2e package
# alone is most of the stage while it leaves a core mostly idle (it waits
# on browsers, desktops and clusters), so its tests are dealt round-robin
# by name into E2E_SHARDS processes that run beside the other packages.
# Everything a test makes on the host is unique across processes (ports,
# data dirs, desktop uids through their registry, network namespaces
# through testnet.Reserve).
#
# Each process runs under gotestsum, which prints packages and failures
# only; at the end the slowest tests of every process are listed, so a
# CI log says where the time went.
#
# usage: scripts/test-rest.sh RACE_RE   (the packages' regexp to leave out)
set -uo pipefail
go=${GO:-go}
read -r -a flags <<<"${TEST_FLAGS:--count=1 -timeout 60m}"
shards=${E2E_SHARDS:-2}
race_re=$1
# The e2e shards share the cores with each other and with the packages
# (KubeVirt's control plane among them): their waits, which bound how
# long a test gives a browser or a desktop before it calls it broken and
# never say how fast it must be, stretch 3× (internal/testwait). On a
# 2-core machine half as fast as the last one, waits of 15-60 s ran out
# at a load of 20-26 in five tests that pass at 1×.
export CORRAL_TEST_WAIT_SCALE=${CORRAL_TEST_WAIT_SCALE:-3}

names=$(sed -n 's/^func \(Test[A-Za-z0-9_]*\)(t \*testing\.T) {$/\1/p' e2e/*_test.go | sort)
[ -n "$names" ] || { echo "test-rest: no tests found in e2e/"; exit 1; }
pkgs=$("$go" list ./... | grep -v -E "$race_re" | grep -v '/e2e$')

# run LABEL GO-TEST-ARGS... runs go test under gotestsum with each line of
# its output led by LABEL, records its exit status in $status_dir/LABEL
# and its events in $status_dir/LABEL.json.
status_dir=$(mktemp -d)
trap 'rm -rf "$status_dir"' EXIT
run() {
	local label=$1
	shift
	{
		"$go" tool gotestsum --format pkgname-and-test-fails --jsonfile "$status_dir/$label.json" -- "$@" 2>&1
		echo $? >"$status_dir/$label"
	} | sed -u "s/^/[$label] /"
}

run packages -p 1 "${flags[@]}" $pkgs &
for ((i = 0; i < shards; i++)); do
	pattern=$(awk -v n="$shards" -v i="$i" 'NR % n == i' <<<"$names" | paste -sd'|')
	[ -n "$pattern" ] || continue
	run "e2e-$((i + 1))of$shards" "${flags[@]}" -run "^($pattern)\$" ./e2e/ &
done
wait

echo "test-rest: tests that took 60 s or more"
for f in "$status_dir"/*.json; do
	"$go" tool gotestsum tool slowest --jsonfile "$f" --threshold 60s | sed "s/^/[$(basename "$f" .json)] /"
done

# failures LABEL prints LABEL's failed tests again, each with the first
# lines its test code wrote ("    name.go:NN: ...", where the failure is
# said) and the last lines it wrote (a component's log before the end): CI
# shows only the end of its log, and gotestsum printed them where the
# processes' output interleaved, long before. Lines are cut at 400
# characters: a component's JSON log must not push the failure out of view.
failures() {
	"$go" tool gotestsum --format none --raw-command -- cat "$status_dir/$1.json" 2>&1 |
		awk -v keep=12 -v says=12 '
			/^=== FAIL: / { flush(); head = $0; n = 0; m = 0; next }
			/^DONE / { flush(); print; next }
			head == "" { next }
			/^ +[A-Za-z0-9_.-]+\.go:[0-9]+: / && m < says { said[m++] = cut($0); next }
			{ line[n++ % keep] = cut($0) }
			function cut(s) { return length(s) > 400 ? substr(s, 1, 400) " …" : s }
			function flush(  i, from) {
				if (head == "") return
				print head
				for (i = 0; i < m; i++) print said[i]
				from = n > keep ? n - keep : 0
				if (from > 0) print "    (" from " other lines left out)"
				for (i = from; i < n; i++) print line[i % keep]
				head = ""
			}' | sed "s/^/[$1] /"
}

failed=0
for f in "$status_dir"/*; do
	[[ $f == *.json ]] && continue
	if [ "$(cat "$f")" != 0 ]; then
		label=$(basename "$f")
		echo "test-rest: $label failed (exit $(cat "$f")); its failures again:"
		failures "$label"
		failed=1
	fi
done
# Last, the failed tests' names, each with the first three lines its test
# code wrote (test output does not tell a failure from a log line): the
# very end of a CI log is what is shown first.
for f in "$status_dir"/*.json; do
	[ "$(cat "${f%.json}")" != 0 ] || continue
	"$go" tool gotestsum --format none --raw-command -- cat "$f" 2>&1 |
		awk -v label="$(basename "$f" .json)" '
			/^=== FAIL: / { sub(/^=== FAIL: /, ""); print "test-rest: [" label "] failed: " $0; said = 0; failed = 1; next }
			/^(=== |DONE )/ { failed = 0; next }
			failed && said < 3 && /^ +[A-Za-z0-9_.-]+\.go:[0-9]+: / { sub(/^ +/, ""); print "    " (length($0) > 300 ? substr($0, 1, 300) " …" : $0); said++ }'
done
exit $failed
