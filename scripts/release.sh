#!/usr/bin/env bash
# make release VERSION=vX.Y.Z: the static binary with its version and
# commit linked in, then internal/release writes into dist/ the kube image
# (an OCI image layout tarball), install.yaml pinned to its digest, the
# Helm chart (pinned the same way), the SBOM, the kube backend's H.264
# encoder sidecar image (from Debian's packages, scripts/encoder-rootfs.sh)
# and SHA256SUMS; install.yaml and the chart run that sidecar, pinned by
# digest too. No container daemon is needed. IMAGE names the repository
# install.yaml and the chart pull from (default
# ghcr.io/corral-dev/corral-vdi-portal-kube), ENCODER_IMAGE the encoder's
# (default ghcr.io/corral-dev/corral-vdi-portal-encoder);
# CHART_REGISTRY (oci://HOST/PATH) pushes the chart there, with the
# credentials of `helm registry login` (CHART_PLAIN_HTTP=1 for a registry
# without TLS).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
: "${VERSION:?set VERSION, e.g. make release VERSION=v0.3.0}"
commit=$(git rev-parse HEAD)
git diff --quiet HEAD -- || commit+=-dirty
mkdir -p dist
VERSION=$VERSION COMMIT=$commit bash scripts/build-binary.sh dist/corral-vdi-portal
encoder=$(bash scripts/encoder-rootfs.sh)
go run ./internal/release/cmd/release -version "$VERSION" -commit "$commit" \
	-created "$(git log -1 --format=%ct)" -binary dist/corral-vdi-portal -encoder-root "$encoder/rootfs" \
	-image "${IMAGE:-ghcr.io/corral-dev/corral-vdi-portal-kube}" \
	-encoder-image "${ENCODER_IMAGE:-ghcr.io/corral-dev/corral-vdi-portal-encoder}" -chart-registry "${CHART_REGISTRY:-}" ${CHART_PLAIN_HTTP:+-chart-plain-http} -out dist
