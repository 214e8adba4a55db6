#!/usr/bin/env bash
# Builds (once) and caches the tiny VM image that local vm pools boot: a
# Debian kernel and a busybox-static initramfs whose init runs a getty on the
# serial line (ttyS0) and on the VGA console (tty1), with a root login.
# The initramfs also carries the kernel's virtio-gpu driver and the modules
# it needs, loaded by init: on QEMU's virtio-vga with two outputs the guest
# then has a second monitor (docs/decisions/vm-second-head.md).
# And console keymaps (/usr/share/keymaps/<layout>.bmap), made from X's own
# layouts as Debian's console-setup makes them (ckbcomp, then kbd's
# loadkeys -b, both from Debian's archive at build time), and a loadkeys
# that loads one: `loadkeys de` in the guest makes its keyboard German, the
# one switch docs/consoles.md names for a VM's console.
#
# Nothing here is committed: the kernel comes from Debian's archive with
# `apt-get download`, busybox from the installed busybox-static package, and
# the result goes to a cache folder keyed by this script and both versions:
#   ${CORRAL_VDI_VM_IMAGE_CACHE:-${XDG_CACHE_HOME:-~/.cache}/corral-vdi/vm-image}/<script>-<kernel>_<busybox>/
#     vmlinuz  initramfs.gz
# and `current` in the cache folder is a symlink to the newest build (the
# portal's default image). A second run finds the build and prints its
# folder in well under a second. Tests take the folder this script prints,
# never `current`: two checkouts whose scripts differ share the cache, and
# `current` is whichever of them built last.
#
# The root password is "corral" unless the initramfs carries
# /etc/corral/root.hash (a crypt(3) hash): the portal appends a small cpio
# archive with it to each member's initramfs, so no password or hash is
# ever on QEMU's or the kernel's command line.
#
# Usage: scripts/vm-image.sh   (prints the image folder on stdout)
set -euo pipefail

cache=${CORRAL_VDI_VM_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/corral-vdi/vm-image}
mkdir -p "$cache"

need() { command -v "$1" >/dev/null || { echo "vm-image: $1 not found: apt-get install $2" >&2; exit 1; }; }
need dpkg-deb dpkg

applets=$(/bin/busybox --list 2>/dev/null || true)
[[ $'\n'$applets$'\n' == *$'\ngetty\n'* ]] || { echo "vm-image: /bin/busybox lacks getty: apt-get install busybox-static" >&2; exit 1; }

# The image's layout is this script: any change to it names a new build,
# so a cache filled by an older script is never taken for this one's.
layout=$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-12)
# own prints this script's newest complete build, if any.
own() {
	local d best=
	for d in "$cache"/s"$layout"-*/; do
		[[ -s $d/vmlinuz && -s $d/initramfs.gz ]] || continue
		if [[ -z $best || $d -nt $best ]]; then best=$d; fi
	done
	if [[ -n $best ]]; then echo "${best%/}"; fi
}

# The kernel package linux-image-amd64 points at, e.g. linux-image-6.1.0-57-amd64;
# nothing without package lists (apt-cache fails then: not the script's end).
resolve() { apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/ {print $2; exit}' || true; }
kpkg=$(resolve)
if [[ -z $kpkg && -z $(own) && $(id -u) == 0 ]]; then
	echo "vm-image: no package lists yet: apt-get update" >&2
	apt-get update -q >&2 || true
	kpkg=$(resolve)
fi
if [[ -z $kpkg ]]; then
	# No package lists yet: fall back to this script's newest build (not
	# `current`, which another checkout's script may have built).
	if [[ -n $(own) ]]; then own; exit 0; fi
	echo "vm-image: cannot resolve linux-image-amd64: run apt-get update" >&2
	exit 1
fi
candidate() { apt-cache policy "$1" | awk '/Candidate:/ {print $2}'; }
kver=$(candidate "$kpkg")
bver=$(dpkg-query -W -f='${Version}' busybox-static 2>/dev/null || /bin/busybox | head -1 | awk '{print $2}')
# The keymaps' tools; X's layouts are the installed xkb-data's.
kbdver=$(candidate kbd)
csver=$(candidate console-setup)
key="s${layout}-${kpkg#linux-image-}-${kver}_busybox-${bver}_kbd-${kbdver}_console-setup-${csver}"
key=${key//[^A-Za-z0-9._+-]/_}
out=$cache/$key
if [[ -s $out/vmlinuz && -s $out/initramfs.gz ]]; then
	ln -sfn "$key" "$cache/current"
	echo "$out"
	exit 0
fi

# The console keymaps' tools run here; X's layouts are xkb-data's.
need perl perl
[[ -d /usr/share/X11/xkb/symbols ]] || { echo "vm-image: X's keyboard layouts are missing: apt-get install xkb-data" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "vm-image: downloading $kpkg $kver, kbd $kbdver, console-setup $csver" >&2
(cd "$work" && apt-get download -q "$kpkg=$kver" "kbd=$kbdver" "console-setup=$csver" >&2)
# virtio-gpu and what it needs, in the order init loads them (each one's
# depends= comes before it); Debian builds them as modules.
mods="virtio_ring virtio_pci_modern_dev virtio_pci_legacy_dev virtio virtio_pci drm drm_kms_helper drm_shmem_helper virtio_dma_buf virtio-gpu"
dpkg-deb --fsys-tarfile "$work"/"$kpkg"_*.deb | tar -x -C "$work" --wildcards './boot/vmlinuz-*' \
	$(for m in $mods; do echo "./lib/modules/*/$m.ko"; done)
mkdir -p "$work/out"
cp "$work"/boot/vmlinuz-* "$work/out/vmlinuz"

root=$work/root
mkdir -p "$root"/{bin,sbin,etc,proc,sys,dev,root,tmp,usr/bin,usr/sbin}
cp /bin/busybox "$root/bin/busybox"
mkdir -p "$root/lib/modules"
for m in $mods; do cp "$(find "$work/lib/modules" -name "$m.ko")" "$root/lib/modules/"; done
echo "$mods" >"$root/lib/modules/order"

# Console keymaps: each layout below (setxkbmap's names; us-intl is us
# with its intl variant) as ckbcomp makes it from X's layout, in the
# kernel's binary form that busybox's loadkmap loads. -compact keeps the
# maps of Shift, AltGr, Ctrl and Alt (2.8 KB a layout); the kernel's own
# table composes the dead keys (^ then e is ê).
tools=$work/tools
mkdir -p "$tools"
dpkg-deb -x "$work"/kbd_*.deb "$tools"
dpkg-deb -x "$work"/console-setup_*.deb "$tools"
mkdir -p "$root/usr/share/keymaps"
for l in us us-intl gb de ch fr es se no; do
	perl "$tools/usr/bin/ckbcomp" -compact ${l/-/ } >"$work/$l.kmap" 2>"$work/ckbcomp.log" ||
		{ echo "vm-image: ckbcomp $l failed:" >&2; cat "$work/ckbcomp.log" >&2; exit 1; }
	"$tools/bin/loadkeys" -q -b -u "$work/$l.kmap" >"$root/usr/share/keymaps/$l.bmap"
done
cat >"$root/usr/bin/loadkeys" <<'LOADKEYS'
#!/bin/sh
# loadkeys LAYOUT: the console's keyboard layout (one of /usr/share/keymaps).
[ -f "/usr/share/keymaps/$1.bmap" ] || { echo "loadkeys: no layout '$1'; these are here: $(cd /usr/share/keymaps && ls | sed 's/\.bmap//' | tr '\n' ' ')" >&2; exit 1; }
exec loadkmap <"/usr/share/keymaps/$1.bmap"
LOADKEYS
chmod 755 "$root/usr/bin/loadkeys"
cat >"$root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
hostname corral-vm
for m in $(cat /lib/modules/order); do insmod /lib/modules/$m.ko; done
hash=$(cat /etc/corral/root.hash 2>/dev/null)
[ -n "$hash" ] || hash=$(echo corral | mkpasswd -m sha512 -S corralvm)
rm -f /etc/corral/root.hash
echo "root:$hash:19000:0:99999:7:::" >/etc/shadow
chmod 600 /etc/shadow
exec /sbin/init
INIT
chmod 755 "$root/init"
cat >"$root/etc/inittab" <<'TAB'
ttyS0::respawn:/sbin/getty -L 115200 ttyS0 vt100
tty1::respawn:/sbin/getty 38400 tty1
::ctrlaltdel:/sbin/reboot
TAB
echo 'root:x:0:0:root:/root:/bin/sh' >"$root/etc/passwd"
echo 'root:x:0:' >"$root/etc/group"
printf 'corral tiny VM (\\l): log in as root\n\n' >"$root/etc/issue"
echo '/bin/sh' >"$root/etc/shells"
printf 'export PS1="\\u@\\h:\\w# "\n' >"$root/etc/profile"
(cd "$root" && find . | /bin/busybox cpio -o -H newc 2>/dev/null | gzip -9) >"$work/out/initramfs.gz"

mkdir -p "$out"
mv "$work/out/vmlinuz" "$work/out/initramfs.gz" "$out/"
ln -sfn "$key" "$cache/current"
echo "vm-image: built $out" >&2
echo "$out"
