#!/usr/bin/env bash
# Build and cache KubeVirt's own control plane that the kube tests run
# against: virt-controller and virt-api (KubeVirt), kube-controller-manager
# (for the garbage collector) and the CSI snapshot-controller with its CRDs.
#
#   scripts/kubevirt.sh          build (once) and print the bin folder
#   scripts/kubevirt.sh --path   print the bin folder, build nothing
#
# Everything comes from the Go module proxy through throwaway modules in
# hack/kubevirt, hack/snapshotter and hack/testcluster, cached under a folder
# keyed by version (see ../shared/DESIGN.md, "Control planes"). A cold build
# took ~23 minutes on 2 cores shared with other builds (virt-controller and
# virt-api ~13, kube-controller-manager and snapshot-controller ~10); it
# runs under nice.
set -euo pipefail
cd "$(dirname "$0")/.."

# v1.7.0: the newest release whose whole module graph the proxy serves and
# the checksum database vouches for (v1.8.x needs
# github.com/rhobs/operator-observability-toolkit v0.0.30, which
# sum.golang.org does not know; v1.9.0 needs kubevirt.io/virt-template-api
# v0.2.0, which the proxy does not serve).
KUBEVIRT_VERSION=v1.7.0
KUBE_VERSION=v1.37.2
SNAPSHOTTER_VERSION=v8.7.0
CACHE_ROOT="${CORRAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/corral-vdi}"
DIR="$CACHE_ROOT/kubevirt-$KUBEVIRT_VERSION-kube-$KUBE_VERSION-snap-$SNAPSHOTTER_VERSION"
BIN="$DIR/bin"

if [[ "${1:-}" == "--path" ]]; then
	echo "$BIN"
	exit 0
fi

want=(virt-controller virt-api kube-controller-manager snapshot-controller kubevirt-install.yaml crds/snapshot.storage.k8s.io_volumesnapshots.yaml)
ready() {
	for f in "${want[@]}"; do [[ -e "$BIN/$f" ]] || return 1; done
}

if ready; then
	echo "$BIN"
	exit 0
fi

mkdir -p "$DIR"
exec 9>"$DIR/.lock"
flock 9
if ready; then
	echo "$BIN"
	exit 0
fi

tmp="$DIR/tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp/crds"
trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"

start=$(date +%s)
echo "kubevirt: building KubeVirt $KUBEVIRT_VERSION, kube-controller-manager $KUBE_VERSION, snapshot-controller $SNAPSHOTTER_VERSION into $BIN" >&2
(
	cd hack/kubevirt
	kv="-s -w -X kubevirt.io/client-go/version.gitVersion=$KUBEVIRT_VERSION"
	kv+=" -X kubevirt.io/client-go/version.gitTreeState=clean"
	nice -n 10 go build -trimpath -ldflags "$kv" -o "$tmp/virt-controller" kubevirt.io/kubevirt/cmd/virt-controller
	nice -n 10 go build -trimpath -ldflags "$kv" -o "$tmp/virt-api" kubevirt.io/kubevirt/cmd/virt-api
	# The CRDs and webhook configurations, as KubeVirt's operator generates them.
	nice -n 10 go run -trimpath ./install kubevirt >"$tmp/kubevirt-install.yaml"
)
(
	cd hack/testcluster
	minor="${KUBE_VERSION#v1.}"
	minor="${minor%%.*}"
	k="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION"
	k+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
	k+=" -X k8s.io/component-base/version.gitTreeState=clean"
	nice -n 10 go build -trimpath -ldflags "$k" -o "$tmp/kube-controller-manager" k8s.io/kubernetes/cmd/kube-controller-manager
)
(
	cd hack/snapshotter
	nice -n 10 go build -trimpath -ldflags "-s -w -X main.version=$SNAPSHOTTER_VERSION" -o "$tmp/snapshot-controller" github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller
	# The CRDs ship as yaml in the snapshotter's module; copy them, never commit them.
	src="$(go list -m -f '{{.Dir}}' github.com/kubernetes-csi/external-snapshotter/client/v8)/config/crd"
	cp "$src"/snapshot.storage.k8s.io_*.yaml "$tmp/crds/"
	chmod u+w "$tmp/crds/"*.yaml
)
mkdir -p "$BIN"
cp -r "$tmp/crds" "$BIN/"
for f in virt-controller virt-api kube-controller-manager snapshot-controller kubevirt-install.yaml; do mv "$tmp/$f" "$BIN/$f"; done
echo "kubevirt: built in $(($(date +%s) - start))s" >&2
echo "$BIN"
