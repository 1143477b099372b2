#!/usr/bin/env bash
# Builds the native code and runs its GoogleTest suite on Debian 13 (trixie):
# in a debootstrap root with trixie's XNNPACK, flatbuffers and compilers, made
# once and kept in build-debian13/root ($ETNA_DEBIAN13_ROOT), then updated
# with scripts/setup.sh --native and reused by later runs.
#
#   bash scripts/debian13.sh          (as root; npm run test:debian13)
#
# This checkout is mounted read-only at /src/etna in the root, with
# build-debian13/build-native mounted writable over its build-native/, where
# scripts/test-native.sh builds (kept between runs, so only what changed
# recompiles). The test programs are the checkout's own test/fixtures/pte.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/debian-root.sh

started=$(date +%s)
root=${ETNA_DEBIAN13_ROOT:-$PWD/build-debian13/root}

make_debian_root trixie "$root"

build_dir=$(dirname "$root")/build-native
# The mount point inside the read-only checkout; it is also where a build on
# this machine goes, which the mount hides only inside the root.
mkdir -p "$build_dir" build-native

run_in_root --bind "$PWD" /src/etna --bind-writable "$build_dir" /src/etna/build-native \
  "$root" \
  /bin/bash -euo pipefail -c '
    . /etc/os-release
    echo "debian13: $PRETTY_NAME"
    cd /src/etna
    bash scripts/setup.sh --native
    # Every package setup.sh names for this release exists here (resolved, not installed).
    apt-get install --simulate --no-install-recommends $(bash scripts/setup.sh --list) > /dev/null
    bash scripts/test-native.sh'

echo "debian13: native build and tests passed in $(($(date +%s) - started)) s"
