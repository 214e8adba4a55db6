#!/usr/bin/env bash
# Builds (once) and caches the root file system of the encoder image (the
# kube backend's H.264 sidecar, docs/decisions/kube-h264-encoder.md) from
# Debian's packages, without a container daemon: exactly the packages and
# versions scripts/encoder-packages.txt pins (the packages the
# Dockerfile's encoder stage installs — GStreamer's tools and the plugins
# of the hubs' pipeline, rfb/h264_encoder.go —, coreutils for the
# sidecar's startup probe's `test -S` and base-files, with the dependency
# closure apt resolved for them on an empty system: Depends and
# Pre-Depends, no Recommends). Each is downloaded with `apt-get download
# NAME=VERSION` (apt checks it against the signed archive's hashes) and
# unpacked with `dpkg-deb -x`. No maintainer script runs: none of these
# packages needs one to encode. Documentation, manuals and translations
# are left out. Each package's control fields go to
# var/lib/dpkg/status.d/NAME (as distroless images record theirs), and
# base-files gives etc/os-release, so that image scanners (Trivy, Grype,
# Syft) know the image's Debian packages and their versions.
#
# Checked at build: apt resolves the pinned set on an empty system to
# itself (it is a whole closure, every version still served by the apt
# sources), and every .deb unpacked is the package and version pinned.
# deb.debian.org serves only each suite's newest versions: after a
# Debian point release or security update the build stops and says so;
# point apt at snapshot.debian.org (the date in the pins' header) or
# refresh the pins with --update, review and commit them.
#
# The result goes to a cache folder keyed by the pinned list:
#   ${CORRAL_VDI_ENCODER_ROOTFS_CACHE:-${XDG_CACHE_HOME:-~/.cache}/corral-vdi/encoder-rootfs}/<key>/
#     rootfs/  packages.txt (name=version, one a line)
# and `current` in the cache folder is a symlink to the newest build. A
# second run finds the build and prints its folder without asking apt.
#
# internal/release builds the encoder image from rootfs/ (make release),
# and TestEncoderImage runs the image's encoder.
#
# Usage: scripts/encoder-rootfs.sh            (prints the folder on stdout)
#        scripts/encoder-rootfs.sh --update   (pins what apt resolves now, then builds)
set -euo pipefail
export LC_ALL=C # one sort order for the pins, apt's answer and the .debs

cache=${CORRAL_VDI_ENCODER_ROOTFS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/corral-vdi/encoder-rootfs}
pins=$(dirname "${BASH_SOURCE[0]}")/encoder-packages.txt
mkdir -p "$cache"

need() { command -v "$1" >/dev/null || { echo "encoder-rootfs: $1 not found: apt-get install $2" >&2; exit 1; }; }
need dpkg-deb dpkg
need apt-get apt

packages=(gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-ugly coreutils base-files)
# The layout's version: bump it when what is unpacked or left out changes.
layout=2
# resolve prints, as sorted name=version lines, what apt installs for its
# arguments on an empty system (and apt's errors on stderr).
resolve() {
	apt-get install -s -q --no-install-recommends -o Dir::State::Status=/dev/null "$@" |
		sed -n 's/^Inst \([^ ]*\) (\([^ ]*\) .*/\1=\2/p' | sort
}
# lists makes sure apt has package lists (apt-get update once, as root).
lists() {
	if [[ -z $(resolve base-files 2>/dev/null) && $(id -u) == 0 ]]; then
		echo "encoder-rootfs: no package lists yet: apt-get update" >&2
		apt-get update -q >&2 || true
	fi
}

if [[ ${1:-} == --update ]]; then
	lists
	list=$(resolve "${packages[@]}" 2>/dev/null)
	[[ -n $list ]] || { echo "encoder-rootfs: apt resolves none of ${packages[*]}: run apt-get update (Debian bookworm's main)" >&2; exit 1; }
	{
		sed -n '/^#/p' "$pins" | sed "s/resolved on [0-9-]*/resolved on $(date -u +%F)/"
		printf '%s\n' "$list"
	} >"$pins.new"
	mv "$pins.new" "$pins"
	echo "encoder-rootfs: pinned $(wc -l <<<"$list") packages in $pins: review the diff and commit it" >&2
fi

list=$(sed -e '/^#/d' -e '/^$/d' "$pins")
key="v${layout}-$(sha256sum <<<"$list" | cut -c1-16)"
out=$cache/$key
if [[ -s $out/packages.txt && -d $out/rootfs/usr/bin ]]; then
	ln -sfn "$key" "$cache/current"
	echo "$out"
	exit 0
fi

lists
# shellcheck disable=SC2086
got=$(resolve $list 2>"$cache/.resolve.err") || true
if [[ $got != "$list" ]]; then
	echo "encoder-rootfs: the pinned packages ($pins) are not what apt resolves from them here:" >&2
	if [[ -z $got ]]; then
		grep '^E:' "$cache/.resolve.err" | sed 's/^/  apt: /' >&2 || true
	else
		diff <(printf '%s\n' "$list") <(printf '%s\n' "$got") | sed -n 's/^< /  pinned, not resolved: /p; s/^> /  resolved, not pinned: /p' >&2 || true
	fi
	echo "  apt serves only each suite's newest versions: point apt's sources at snapshot.debian.org/archive/debian/DATE of the pins' date (then apt-get update), or refresh the pins with scripts/encoder-rootfs.sh --update, review the diff and commit it" >&2
	rm -f "$cache/.resolve.err"
	exit 1
fi
rm -f "$cache/.resolve.err"

work=$(mktemp -d "$cache/.build-XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/debs" "$work/out/rootfs"
echo "encoder-rootfs: downloading $(wc -l <<<"$list") packages" >&2
# shellcheck disable=SC2046
(cd "$work/debs" && apt-get download -q $list >&2)
mkdir -p "$work/out/rootfs/var/lib/dpkg/status.d"
for deb in "$work"/debs/*.deb; do
	name=$(dpkg-deb -f "$deb" Package)
	version=$(dpkg-deb -f "$deb" Version)
	printf '%s=%s\n' "$name" "$version" >>"$work/unpacked.txt"
	dpkg-deb -x "$deb" "$work/out/rootfs"
	{
		dpkg-deb -f "$deb" Package Version Architecture Multi-Arch Source Maintainer Installed-Size Depends Pre-Depends Homepage
		echo "Status: install ok installed"
	} >"$work/out/rootfs/var/lib/dpkg/status.d/$name"
done
if [[ $(sort "$work/unpacked.txt") != "$list" ]]; then
	echo "encoder-rootfs: the .debs apt downloaded are not the pinned versions:" >&2
	diff <(printf '%s\n' "$list") <(sort "$work/unpacked.txt") >&2 || true
	exit 1
fi
rm -rf "$work"/out/rootfs/usr/share/{doc,man,info,locale,lintian,bug,bash-completion}
printf '%s\n' "$list" >"$work/out/packages.txt"
rm -rf "$out"
mv "$work/out" "$out"
ln -sfn "$key" "$cache/current"
echo "encoder-rootfs: built $out" >&2
echo "$out"
