#!/usr/bin/env bash
# Installs everything etna needs on Debian 12 (as root, or with sudo when not
# root), then the npm dependencies, then builds the addon and the TypeScript.
#   bash scripts/setup.sh            system packages + npm ci + build
#   bash scripts/setup.sh --system   system packages only
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libxnnpack-dev libpthreadpool-dev libflatbuffers-dev flatbuffers-compiler
  libgtest-dev clang libclang-rt-14-dev
  libonnx-testdata espeak-ng sox
)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "etna setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

[ "${1:-}" = "--system" ] && exit 0

# onnxruntime-node (a dev dependency, the benchmarks' peer) would otherwise
# try to download GPU extras during its install.
ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund
npm run build
