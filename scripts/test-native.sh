#!/usr/bin/env bash
# Builds and runs the native unit tests (ctest).
#   bash scripts/test-native.sh          optimised build in build-native/
#   bash scripts/test-native.sh --asan   AddressSanitizer + UBSan build (clang) in build-asan/
#   bash scripts/test-native.sh --tsan   ThreadSanitizer build (clang) in build-tsan/
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--asan" ]; then
  dir=build-asan
  flags=(-DCMAKE_BUILD_TYPE=Debug -DETNA_SANITIZE=ON -DCMAKE_CXX_COMPILER=clang++)
  # Leak checking stays on; UBSan findings abort (see CMakeLists.txt).
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
elif [ "${1:-}" = "--tsan" ]; then
  dir=build-tsan
  # Optimised: TSan slows every memory access; the whole suite then runs in
  # under a minute. Any report fails the test that made it (exit code 66).
  # Debian's XNNPACK and pthreadpool are not instrumented: TSan neither sees
  # their memory accesses nor reports them, so no suppressions are needed; races
  # inside them would show as wrong outputs, which sessions_concurrency_test checks.
  flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DETNA_SANITIZE_THREAD=ON -DCMAKE_CXX_COMPILER=clang++)
  export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}"
else
  dir=build-native
  flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
fi

cmake -S . -B "$dir" -G Ninja "${flags[@]}" > /dev/null
cmake --build "$dir" --parallel 2
# The JUnit file is what scripts/test-summary.mjs counts (passed, failed, skipped).
ctest --test-dir "$dir" --output-on-failure --timeout 600 --output-junit "$PWD/$dir/ctest-junit.xml"
