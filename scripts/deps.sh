#!/usr/bin/env bash
# Installs the Debian packages the portal (and, with --test, its tests)
# needs, skipping those already installed. Needs root or sudo.
set -euo pipefail

pkgs=(
	tigervnc-standalone-server # Xvnc: display + VNC server of local desktops
	tigervnc-tools             # vncpasswd
	openbox                    # window manager of local desktops
	xterm                      # the terminal window on local desktops
	x11-xserver-utils          # xsetroot, xmodmap
	xclip                      # the clipboard from a local desktop's shell (and the clipboard tests)
	fonts-dejavu-core
	freerdp2-shadow-x11        # RDP for local desktops
	winpr-utils                # winpr-hash: per-member NLA credentials
	qemu-system-x86            # vm pools of the local backend
	busybox-static
	util-linux # prlimit: each local desktop's limits (essential, listed for clarity)
	bubblewrap # the namespaces of every local desktop (as its uid when the portal is root)
	passt      # pasta: outbound network of local desktops (pool policy network=outbound)
	e2fsprogs  # mkfs.ext4, e2fsck: a persistent member's home image (its disk bound)
	mount      # mount -o loop: the home image on the member's home (essential, listed for clarity)
	ca-certificates # make release: the CA bundle the kube image carries (and OIDC/API server TLS)
	pulseaudio                # each local desktop's own sound server
	gstreamer1.0-tools        # gst-launch-1.0: the sound's Opus encoder, inside the desktop
	gstreamer1.0-plugins-base # opusenc, oggmux
	gstreamer1.0-pulseaudio   # pulsesrc
	gstreamer1.0-plugins-good # multipartmux: the screen hub's H.264 encoder frames its access units
	gstreamer1.0-plugins-ugly # x264enc: the screen hub's H.264 encoder (RFB encoding 50), beside the portal
)
# Browser clients come from npm at build time; keep a Node.js that is there.
command -v npm >/dev/null || pkgs+=(nodejs npm)
if [[ ${1:-} == --test ]]; then
	pkgs+=(chromium x11-utils) # e2e: Debian Chromium driven by Playwright; xwininfo for desktop tests
	pkgs+=(nginx-light)        # e2e: the load balancer in front of two replicas (TestHA)
	pkgs+=(postgresql)         # the PostgreSQL side of the store's conformance suite and e2e (initdb in a temp dir)
	pkgs+=(curl bindfs)        # e2e: attacks from inside a desktop; a filesystem that ignores ownership
	pkgs+=(usbredirect)        # `usb redir` runs it on the user's machine; doctor and the CLI tests look for it
	pkgs+=(websockify)         # make bench: the relay is measured against it
	pkgs+=(iproute2)           # e2e identity attacks (a test-private address) and make bench-wan (ip netns)
	pkgs+=(pulseaudio-utils)   # e2e: pactl plays a tone in a desktop's sink
	pkgs+=(x11-apps)           # e2e: xwud shows a photo on a desktop, xwd reads its exact pixels
	pkgs+=(gstreamer1.0-x)     # make bench-wan: ximagesink plays the video workload in a desktop
	pkgs+=(prometheus)         # e2e: the shipped alerts and dashboard evaluated on a real portal's /metrics
	pkgs+=(docker-registry skopeo) # internal/release: a release pushed to a real OCI registry (CNCF distribution) on loopback, as an operator pushes it
fi

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "deps: installing ${missing[*]}" >&2
sudo=()
[[ $(id -u) -eq 0 ]] || sudo=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
