#!/usr/bin/env bash
# Build and cache the real kube-apiserver and etcd that the tests run against.
#
#   scripts/testcluster.sh          build (once) and print the bin folder
#   scripts/testcluster.sh --path   print the bin folder, build nothing
#
# The binaries come from the Go module proxy through the throwaway module in
# hack/testcluster (see ../shared/DESIGN.md, "Test harness"). They are cached
# under a folder keyed by version, so every run after the first is instant.
# A cold build takes ~6-9 minutes on 2 cores and ~2.8 GB of memory; it runs
# under nice so it does not starve whoever shares the machine.
set -euo pipefail
cd "$(dirname "$0")/.."

KUBE_VERSION=v1.37.2
ETCD_VERSION=3.7.0
CACHE_ROOT="${CORRAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/corral-vdi}"
DIR="$CACHE_ROOT/kube-$KUBE_VERSION-etcd-$ETCD_VERSION"
BIN="$DIR/bin"

if [[ "${1:-}" == "--path" ]]; then
	echo "$BIN"
	exit 0
fi

ready() { [[ -x "$BIN/kube-apiserver" && -x "$BIN/etcd" ]]; }

# The kube tests also run KubeVirt's own control plane: build (once) and
# cache it too, after the apiserver (scripts/kubevirt.sh), then print the
# apiserver's bin folder.
done_() {
	bash scripts/kubevirt.sh >/dev/null
	echo "$BIN"
	exit 0
}

if ready; then
	done_
fi

mkdir -p "$DIR"
# One build at a time: engineers and CI on the same machine share the cache.
exec 9>"$DIR/.lock"
flock 9
if ready; then
	done_
fi

minor="${KUBE_VERSION#v1.}"
minor="${minor%%.*}"
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION"
ldflags+=" -X k8s.io/component-base/version.gitMajor=1"
ldflags+=" -X k8s.io/component-base/version.gitMinor=$minor"
ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"

tmp="$DIR/tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT

start=$(date +%s)
echo "testcluster: building kube-apiserver $KUBE_VERSION and etcd $ETCD_VERSION into $BIN (cold: ~6-9 min)" >&2
(
	cd hack/testcluster
	export CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"
	nice -n 10 go build -trimpath -ldflags "$ldflags" -o "$tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
	nice -n 10 go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3
)
"$tmp/kube-apiserver" --version >&2
"$tmp/etcd" --version | head -1 >&2
mkdir -p "$BIN"
mv "$tmp/etcd" "$BIN/etcd"
mv "$tmp/kube-apiserver" "$BIN/kube-apiserver"
echo "testcluster: built in $(($(date +%s) - start))s" >&2
done_
