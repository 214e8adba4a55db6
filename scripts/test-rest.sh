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
# usage: scripts/test-rest.sh RACE_RE   (the packages' regexp to leave out)
set -uo pipefail
go=${GO:-go}
read -r -a flags <<<"${TEST_FLAGS:--count=1 -timeout 60m}"
shards=${E2E_SHARDS:-2}
race_re=$1

names=$(sed -n 's/^func \(Test[A-Za-z0-9_]*\)(t \*testing\.T) {$/\1/p' e2e/*_test.go | sort)
[ -n "$names" ] || { echo "test-rest: no tests found in e2e/"; exit 1; }
pkgs=$("$go" list ./... | grep -v -E "$race_re" | grep -v '/e2e$')

# run LABEL CMD... runs CMD with each line of its output led by LABEL and
# records its exit status in $status_dir/LABEL.
status_dir=$(mktemp -d)
trap 'rm -rf "$status_dir"' EXIT
run() {
	local label=$1
	shift
	{ "$@" 2>&1; echo $? >"$status_dir/$label"; } | sed -u "s/^/[$label] /"
}

run packages "$go" test -p 1 "${flags[@]}" $pkgs &
for ((i = 0; i < shards; i++)); do
	pattern=$(awk -v n="$shards" -v i="$i" 'NR % n == i' <<<"$names" | paste -sd'|')
	[ -n "$pattern" ] || continue
	run "e2e-$((i + 1))of$shards" "$go" test "${flags[@]}" -run "^($pattern)\$" ./e2e/ &
done
wait

failed=0
for f in "$status_dir"/*; do
	if [ "$(cat "$f")" != 0 ]; then
		echo "test-rest: $(basename "$f") failed (exit $(cat "$f"))"
		failed=1
	fi
done
exit $failed
