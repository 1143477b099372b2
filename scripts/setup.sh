#!/usr/bin/env bash
# Installs everything etna needs on Debian 12 (bookworm) or Debian 13 (trixie)
# (as root, or with sudo when not root), then the npm dependencies, then
# builds the addon and the TypeScript.
#   bash scripts/setup.sh            system packages + npm ci + build
#   bash scripts/setup.sh --system   system packages only
#   bash scripts/setup.sh --native   only the packages that build and test the native code
#   bash scripts/setup.sh --list     print the system packages (all of them), install nothing
set -euo pipefail
cd "$(dirname "$0")/.."

# Package names that differ between releases. clang's sanitizer and libFuzzer
# runtimes ship in a package named after the release's default clang.
# $ETNA_OS_RELEASE names another os-release file (the tests use it).
release=$( . "${ETNA_OS_RELEASE:-/etc/os-release}" && echo "${VERSION_CODENAME:-${VERSION_ID:-unknown}}")
case "$release" in
  bookworm | 12) CLANG_RUNTIME=libclang-rt-14-dev ;;
  trixie | 13) CLANG_RUNTIME=libclang-rt-19-dev ;;
  *)
    echo "etna setup: Debian 12 (bookworm) or 13 (trixie) expected, found '$release'" >&2
    exit 1
    ;;
esac

NATIVE_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libxnnpack-dev libpthreadpool-dev libflatbuffers-dev flatbuffers-compiler
  libgtest-dev
)
# The sanitizer and fuzz builds, the C++ formatter npm run lint checks with,
# the prebuild (patchelf) that the pack-and-install test puts in the tarball,
# the data the JavaScript tests read, curl, which the docs' server examples
# call (test/package/docs.test.ts runs them), and redis-server, which the
# tests of conversations handed between replicas start (test/serve/).
TOOL_PACKAGES=(clang "$CLANG_RUNTIME" clang-format libonnx-testdata espeak-ng sox patchelf curl redis-server)

case "${1:-}" in
  --native) wanted=("${NATIVE_PACKAGES[@]}") ;;
  *) wanted=("${NATIVE_PACKAGES[@]}" "${TOOL_PACKAGES[@]}") ;;
esac
if [ "${1:-}" = "--list" ]; then
  printf '%s\n' "${wanted[@]}"
  exit 0
fi

. scripts/apt-packages.sh
install_missing_packages "etna setup" "${wanted[@]}"

case "${1:-}" in --system | --native) exit 0 ;; esac

# onnxruntime-node (a dev dependency, the benchmarks' peer) would otherwise
# try to download GPU extras during its install.
ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund
npm run build
