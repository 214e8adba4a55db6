#!/usr/bin/env bash
# Builds (once) and caches the root file system of the encoder image (the
# kube backend's H.264 sidecar, docs/decisions/kube-h264-encoder.md) from
# Debian's packages, without a container daemon: the packages the
# Dockerfile's encoder stage installs (GStreamer's tools and the plugins
# of the hubs' pipeline, rfb/h264_encoder.go) and coreutils (the sidecar's
# startup probe runs `test -S`), with the dependency closure apt resolves
# for them on an empty system (Depends and Pre-Depends, no Recommends),
# each downloaded with `apt-get download` (apt checks it against the
# signed archive's hashes) and unpacked with `dpkg-deb -x`. No maintainer
# script runs: none of these packages needs one to encode. Documentation,
# manuals and translations are left out. Each package's control fields go
# to var/lib/dpkg/status.d/NAME (as distroless images record theirs), and
# base-files gives etc/os-release, so that image scanners (Trivy, Grype,
# Syft) know the image's Debian packages and their versions.
#
# The result goes to a cache folder keyed by the resolved package list:
#   ${CORRAL_VDI_ENCODER_ROOTFS_CACHE:-${XDG_CACHE_HOME:-~/.cache}/corral-vdi/encoder-rootfs}/<key>/
#     rootfs/  packages.txt (name=version, one a line)
# and `current` in the cache folder is a symlink to the newest build. A
# second run finds the build and prints its folder.
#
# internal/release builds the encoder image from rootfs/ (make release),
# and TestEncoderImage runs the image's encoder.
#
# Usage: scripts/encoder-rootfs.sh   (prints the folder on stdout)
set -euo pipefail

cache=${CORRAL_VDI_ENCODER_ROOTFS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/corral-vdi/encoder-rootfs}
mkdir -p "$cache"

need() { command -v "$1" >/dev/null || { echo "encoder-rootfs: $1 not found: apt-get install $2" >&2; exit 1; }; }
need dpkg-deb dpkg
need apt-get apt

packages=(gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-ugly coreutils base-files)
# The layout's version: bump it when what is unpacked or left out changes.
layout=2
resolve() {
	apt-get install -s -q --no-install-recommends -o Dir::State::Status=/dev/null "${packages[@]}" 2>/dev/null |
		sed -n 's/^Inst \([^ ]*\) (\([^ ]*\) .*/\1=\2/p' | sort
}
list=$(resolve)
if [[ -z $list && $(id -u) == 0 ]]; then
	echo "encoder-rootfs: no package lists yet: apt-get update" >&2
	apt-get update -q >&2 || true
	list=$(resolve)
fi
if [[ -z $list ]]; then
	if [[ -d $cache/current/rootfs ]]; then readlink -f "$cache/current"; exit 0; fi
	echo "encoder-rootfs: apt resolves none of ${packages[*]}: run apt-get update (Debian bookworm's main)" >&2
	exit 1
fi
key="v${layout}-$(sha256sum <<<"$list" | cut -c1-16)"
out=$cache/$key
if [[ -s $out/packages.txt && -d $out/rootfs/usr/bin ]]; then
	ln -sfn "$key" "$cache/current"
	echo "$out"
	exit 0
fi

work=$(mktemp -d "$cache/.build-XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/debs" "$work/out/rootfs"
echo "encoder-rootfs: downloading $(wc -l <<<"$list") packages" >&2
# shellcheck disable=SC2046
(cd "$work/debs" && apt-get download -q $list >&2)
mkdir -p "$work/out/rootfs/var/lib/dpkg/status.d"
for deb in "$work"/debs/*.deb; do
	dpkg-deb -x "$deb" "$work/out/rootfs"
	name=$(dpkg-deb -f "$deb" Package)
	{
		dpkg-deb -f "$deb" Package Version Architecture Multi-Arch Source Maintainer Installed-Size Depends Pre-Depends Homepage
		echo "Status: install ok installed"
	} >"$work/out/rootfs/var/lib/dpkg/status.d/$name"
done
rm -rf "$work"/out/rootfs/usr/share/{doc,man,info,locale,lintian,bug,bash-completion}
printf '%s\n' "$list" >"$work/out/packages.txt"
rm -rf "$out"
mv "$work/out" "$out"
ln -sfn "$key" "$cache/current"
echo "encoder-rootfs: built $out" >&2
echo "$out"
