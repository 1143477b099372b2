#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) in build-fuzz/ and runs them.
#   bash scripts/fuzz.sh                      every target for 60 s
#   bash scripts/fuzz.sh --seconds 600        every target for 600 s
#   bash scripts/fuzz.sh --runs 1000000       every target for a fixed number of executions
#   bash scripts/fuzz.sh --target fuzz_program --seconds 30
#   bash scripts/fuzz.sh --replay             run every file in fuzz/regressions/<target>/ once
# Extra CMake arguments for the fuzz build go in $ETNA_FUZZ_CMAKE_ARGS.
#
# Seeds: the committed inputs in fuzz/corpus/<target>/ (programs authored
# with lib/export, see fuzz/README.md), the real programs of the testdata
# folder ($ETNA_TESTDATA, default test/fixtures/pte),
# read in place, and for fuzz_xnnpack_payload the XnnpackBackend payloads cut
# out of those programs into build-fuzz/seeds/ at run time. New inputs the
# fuzzer finds go to build-fuzz/corpus/<target>/, crashes to
# build-fuzz/artifacts/<target>/. Copy a crash into fuzz/regressions/<target>/
# to keep it as a regression (test/api/fuzz-regressions.test.ts replays them).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=60
runs=""
targets=(fuzz_program fuzz_xnnpack_payload)
replay=0
jobs_flag=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --target) targets=("$2"); shift 2 ;;
    --replay) replay=1; shift ;;
    --jobs) jobs_flag=(-fork="$2"); shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "unknown option: $1" >&2; exit 2 ;;
  esac
done

testdata="${ETNA_TESTDATA:-$PWD/test/fixtures/pte}"
export ETNA_TESTDATA="$testdata"

cmake -S native/test/fuzz -B build-fuzz -G Ninja ${ETNA_FUZZ_CMAKE_ARGS:-} > /dev/null
cmake --build build-fuzz --parallel 2

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# One line per input or target, "passed|failed NAME", read by
# scripts/test-summary.mjs.
record() {
  echo "$1 $2" >> "$results"
}

if [ "$replay" = 1 ]; then
  results=build-fuzz/replay-results.txt
  : > "$results"
  status=0
  for target in "${targets[@]}"; do
    dir="fuzz/regressions/$target"
    [ -d "$dir" ] || continue
    mapfile -t files < <(find "$dir" -type f ! -name '*.md' | sort)
    [ "${#files[@]}" -gt 0 ] || continue
    echo "== $target: replaying ${#files[@]} regression input(s)"
    # One run per input, so each is counted on its own.
    for file in "${files[@]}"; do
      if "build-fuzz/$target" -runs=1 "$file"; then record passed "$file"; else record failed "$file"; status=1; fi
    done
  done
  exit "$status"
fi

if [ ! -f "$testdata/et_add.pte" ]; then
  echo "no testdata at $testdata (set ETNA_TESTDATA): the fuzzers need the real programs as seeds" >&2
  exit 1
fi

payload_seeds=build-fuzz/seeds/fuzz_xnnpack_payload
mkdir -p "$payload_seeds"
build-fuzz/fuzz_seed_payloads "$payload_seeds" "$testdata"/*.pte
declare -A seeds=([fuzz_program]="$testdata" [fuzz_xnnpack_payload]="$payload_seeds")

results=build-fuzz/run-results.txt
: > "$results"
status=0
for target in "${targets[@]}"; do
  work="build-fuzz/corpus/$target"
  artifacts="build-fuzz/artifacts/$target"
  mkdir -p "$work" "$artifacts"
  dirs=("$work" "${seeds[$target]}")
  [ -d "fuzz/corpus/$target" ] && dirs+=("fuzz/corpus/$target")
  limit=(-max_total_time="$seconds")
  [ -n "$runs" ] && limit=(-runs="$runs")
  echo "== $target"
  "build-fuzz/$target" "${limit[@]}" "${jobs_flag[@]}" \
    -timeout=30 -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "${dirs[@]}" && record passed "$target" ||
    { record failed "$target"; status=1; echo "== $target found a crash (see $artifacts/)" >&2; }
done
exit "$status"
