# Three images from one build stage:
#
#   docker build --target kube -t ghcr.io/corral-dev/corral-vdi-portal-kube .
#       the Kubernetes backend: the static binary on distroless, non-root,
#       no desktop packages (deploy/ runs it)
#   docker build --target encoder -t ghcr.io/corral-dev/corral-vdi-portal-encoder .
#       the kube image's H.264 encoder sidecar (`corral-vdi-portal encoder`):
#       the same binary with GStreamer's x264enc (deploy/overlays/h264)
#   docker build -t ghcr.io/corral-dev/corral-vdi-portal .
#       the embedded local backend: desktops run inside the container
#
# The build stage runs scripts/build-binary.sh, which CI also runs outside
# Docker (there is no Docker engine on the test machines). Releases are
# made without Docker: `make release VERSION=vX.Y.Z` writes the kube image
# as an OCI tarball (docs/operating.md); this file is for local images.
#
# Every base is pinned by the digest of its multi-arch index, as public
# Dockerfiles pin these tags (the test machines reach no registry, so the
# digests were not pulled here): check one with
# `crane digest golang:1.26-bookworm` and bump tag and digest together
# (Renovate and Dependabot do). VERSION and COMMIT (--build-arg) are
# linked in for `corral-vdi-portal version`.

FROM golang:1.26-bookworm@sha256:18aedc16aa19b3fd7ded7245fc14b109e054d65d22ed53c355c899582bbb2113 AS build
RUN apt-get update && apt-get install -y --no-install-recommends nodejs npm && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION= COMMIT=
RUN bash scripts/build-binary.sh /out/corral-vdi-portal

# The kube backend needs only the binary, CA certificates (OIDC issuers,
# the API server) and a writable data dir, which deploy/ mounts.
FROM gcr.io/distroless/static-debian13:nonroot@sha256:f7f8f729987ad0fdf6b05eeeae94b26e6a0f613bdf46feea7fc40f7bd72953e6 AS kube
COPY --from=build /out/corral-vdi-portal /usr/local/bin/corral-vdi-portal
USER 65532:65532
ENV CORRAL_VDI_BACKEND=kube CORRAL_VDI_LISTEN=0.0.0.0:8080 CORRAL_VDI_DATA_DIR=/var/lib/corral-vdi
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/corral-vdi-portal"]
CMD ["serve"]

# The H.264 encoder sidecar of the kube backend's Pod: the binary serves
# encoders on a Unix socket the portal container shares
# (docs/decisions/kube-h264-encoder.md); GStreamer's tools and the
# plugins of the hubs' pipeline (rfb/h264_encoder.go) and nothing else.
FROM debian:bookworm-slim@sha256:7b140f374b289a7c2befc338f42ebe6441b7ea838a042bbd5acbfca6ec875818 AS encoder
RUN apt-get update && apt-get install -y --no-install-recommends \
        gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-ugly \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/corral-vdi-portal /usr/local/bin/corral-vdi-portal
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/corral-vdi-portal"]
CMD ["encoder", "-socket", "/run/corral-vdi-encoder/h264.sock"]

# The local backend (the default target): Xvnc, a window manager and
# freerdp-shadow for the desktops it runs itself. Bookworm, not trixie:
# trixie has freerdp3 only, which the local backend is not tested with.
FROM debian:bookworm-slim@sha256:7b140f374b289a7c2befc338f42ebe6441b7ea838a042bbd5acbfca6ec875818 AS local
RUN apt-get update && apt-get install -y --no-install-recommends \
        tigervnc-standalone-server tigervnc-tools openbox xterm x11-xserver-utils fonts-dejavu-core \
        freerdp2-shadow-x11 winpr-utils bubblewrap \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 corral
COPY --from=build /out/corral-vdi-portal /usr/local/bin/corral-vdi-portal
USER 10001:10001
ENV CORRAL_VDI_LISTEN=0.0.0.0:8080 CORRAL_VDI_AUTH=tailscale CORRAL_VDI_DATA_DIR=/home/corral/data
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/corral-vdi-portal"]
CMD ["serve"]
