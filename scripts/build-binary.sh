#!/usr/bin/env bash
# Builds the portal binary both container images ship (Dockerfile's build
# stage runs exactly this), and CI runs it outside Docker too
# (internal/deploytest's TestImageBuild): the browser clients from npm,
# then a static, reproducible Go binary (no cgo: the kube image has no libc).
#
#   bash scripts/build-binary.sh [OUT]   # default bin/corral-vdi-portal
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${1:-bin/corral-vdi-portal}
bash scripts/assets.sh
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out" ./cmd/corral-vdi-portal
