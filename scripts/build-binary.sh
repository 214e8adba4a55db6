#!/usr/bin/env bash
# Builds the portal binary both container images ship (Dockerfile's build
# stage runs exactly this), and CI runs it outside Docker too
# (internal/deploytest's TestImageBuild): the browser clients from npm,
# then a static, reproducible Go binary (no cgo: the kube image has no libc).
#
#   bash scripts/build-binary.sh [OUT]   # default bin/corral-vdi-portal
#
# VERSION (e.g. v0.3.0) and COMMIT, when set, are linked in and printed by
# `corral-vdi-portal version`; without COMMIT the binary reports the git
# revision Go stamps into it (none in a Docker build without .git).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${1:-bin/corral-vdi-portal}
bash scripts/assets.sh
pkg=github.com/corral-dev/corral-vdi-portal/portal
ldflags="-s -w"
[[ -n ${VERSION:-} ]] && ldflags+=" -X $pkg.version=$VERSION"
[[ -n ${COMMIT:-} ]] && ldflags+=" -X $pkg.commit=$COMMIT"
CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out" ./cmd/corral-vdi-portal
