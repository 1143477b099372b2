#!/usr/bin/env bash
# Builds and runs the native unit tests (ctest).
#   bash scripts/test-native.sh          optimised build in build-native/
#   bash scripts/test-native.sh --asan   AddressSanitizer + UBSan build (clang) in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--asan" ]; then
  dir=build-asan
  flags=(-DCMAKE_BUILD_TYPE=Debug -DETNA_SANITIZE=ON -DCMAKE_CXX_COMPILER=clang++)
  # Leak checking stays on; UBSan findings abort (see CMakeLists.txt).
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
else
  dir=build-native
  flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
fi

cmake -S . -B "$dir" -G Ninja "${flags[@]}" > /dev/null
cmake --build "$dir" --parallel 2
ctest --test-dir "$dir" --output-on-failure --timeout 600
