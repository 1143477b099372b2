#!/usr/bin/env bash
# Runs the native unit tests built for linux-arm64 (scripts/build-arm64.sh,
# which runs first and rebuilds only what changed) under QEMU's user-mode
# emulator, on two CPUs:
#   max          QEMU's default: every Armv8/Armv9 feature it emulates, so
#                XNNPACK picks its dot-product and fp16 kernels
#   cortex-a72   plain Armv8.0-A with NEON (a Raspberry Pi 4): XNNPACK's base kernels
# ctest runs each test program in shards, through the emulator the toolchain
# file names (see CMakeLists.txt). Fails on a failed or a skipped test; each
# CPU's GoogleTest XML reports are left in build-arm64/native/gtest-results-<cpu>/.
#
#   bash scripts/test-arm64.sh        (npm run test:arm64)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/build-arm64.sh
dir=build-arm64/native
for cpu in max cortex-a72; do
  started=$(date +%s)
  rm -rf "$dir/gtest-results" "$dir/gtest-results-$cpu"
  QEMU_CPU=$cpu ctest --test-dir "$dir" --output-on-failure --timeout 900 --parallel "$(nproc)"
  mv "$dir/gtest-results" "$dir/gtest-results-$cpu"
  tests=$(cat "$dir/gtest-results-$cpu"/*.xml | grep -c '<testcase ' || true)
  skipped=$(cat "$dir/gtest-results-$cpu"/*.xml | grep -c '<testcase [^>]*result="skipped"' || true)
  echo "test-arm64: $cpu: $tests tests passed ($skipped skipped) in $(($(date +%s) - started)) s"
  # The kernel paths the tests compared on this CPU (KernelPaths records them).
  for key in cpu_features dot_paths attention_paths; do
    value=$(cat "$dir/gtest-results-$cpu"/*.xml | grep -o "name=\"$key\" value=\"[^\"]*\"\|$key=\"[^\"]*\"" | head -n 1 | sed 's/.*"\(.*\)"$/\1/' || true)
    echo "test-arm64: $cpu: $key: ${value:-(not recorded)}"
  done
  [ "$skipped" -eq 0 ] || exit 1
done
