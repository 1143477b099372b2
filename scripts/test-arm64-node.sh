#!/usr/bin/env bash
# Runs vitest suites against the linux-arm64 addon (scripts/build-arm64.sh,
# which runs first) in a Debian 13 arm64 root, every program in it emulated by
# QEMU through binfmt_misc: arm64 Node.js loading the arm64 etna.node.
#
#   bash scripts/test-arm64-node.sh [FILE|FOLDER...]   (as root; npm run test:arm64-node)
#
# By default: test/api but
# - dispose-memory.test.ts, whose six children load and pack a 16 MiB program
#   120 times each, minutes past its time limit when emulated, and whose
#   resident-set bounds would count QEMU's own cache of translated code;
# - tensor.test.ts and names-feeds.test.ts, which compare with onnxruntime-node:
#   its arm64 library crashes as it loads under QEMU's user-mode emulation on
#   some hosts (its cpuinfo reads the host's /proc/cpuinfo and /sys cache
#   topology, which QEMU passes through), before any etna code runs.
#
# The root is the arm64 clean room's base (scripts/cleanroom.sh: Debian 13
# with its Node.js 20), made once and kept; each run works in an overlay over
# it, so the root stays as made. Debian 13 for its Node.js: vitest needs 20.19 or later, and
# Debian 12 has 18. The addon links Debian 12's XNNPACK, pthreadpool and cpuinfo
# (the build's sysroot), which run on Debian 13's C and C++ runtimes, as the
# x86-64 prebuild's bundled copies do.
#
# This checkout is mounted read-only at /src/etna, with the arm64 addon over
# its build/Release. node_modules holds this machine's build of vitest's
# bundler (rolldown), which is native code: the arm64 build of the same
# version, from the npm registry, is kept in build-arm64/node_modules, which
# Node.js in the root searches too (NODE_PATH). vitest's JSON report goes to
# build-arm64/vitest-results.json.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/debian-root.sh

started=$(date +%s)
bash scripts/build-arm64.sh
out=$PWD/build-arm64
root=$(bash scripts/cleanroom.sh base arm64)

version=$(node -p "require('rolldown/package.json').version")
binding=$out/node_modules/@rolldown/binding-linux-arm64-gnu
if [ "$(node -p "require('$binding/package.json').version" 2> /dev/null)" != "$version" ]; then
  rm -rf "$binding" "$out/npm-pack"
  mkdir -p "$binding" "$out/npm-pack"
  (cd "$out/npm-pack" && npm pack --silent "@rolldown/binding-linux-arm64-gnu@$version" > /dev/null)
  tar -xzf "$out"/npm-pack/*.tgz -C "$binding" --strip-components=1
  rm -rf "$out/npm-pack"
fi

run=$out/run
rm -rf "$run"
mkdir -p "$run/upper" "$run/work" "$run/merged" "$run/report"
args=("$@")
[ "${#args[@]}" -gt 0 ] || args=(test/api --exclude test/api/dispose-memory.test.ts
  --exclude test/api/tensor.test.ts --exclude test/api/names-feeds.test.ts)
mkdir -p build/Release  # where the arm64 addon is mounted
# The checkout is read-only there: --configLoader runner, as vite's default
# loader writes the bundled config into node_modules/.vite-temp; --no-cache,
# as vitest keeps its cache in node_modules/.vite.
run_in_root --overlay "$root" "$run/upper" "$run/work" \
  --bind "$PWD" /src/etna --bind "$out/Release" /src/etna/build/Release \
  --bind "$out/sysroot/usr/lib/aarch64-linux-gnu" /opt/etna/lib --bind "$out/node_modules" /opt/etna/node_modules \
  --bind-writable "$run/report" /opt/etna/report \
  "$run/merged" \
  /bin/bash -euo pipefail -c '
    cd /src/etna
    echo "test-arm64-node: $(. /etc/os-release && echo "$PRETTY_NAME"), Node.js $(node --version) on $(uname -m)"
    LD_LIBRARY_PATH=/opt/etna/lib NODE_PATH=/opt/etna/node_modules \
      node node_modules/vitest/vitest.mjs run --configLoader runner --no-cache --reporter=default --reporter=json \
      --outputFile.json=/opt/etna/report/vitest-results.json "$@"' \
  test-arm64-node "${args[@]}"
cp "$run/report/vitest-results.json" "$out/vitest-results.json"
rm -rf "$run"
echo "test-arm64-node: passed in $(($(date +%s) - started)) s"
