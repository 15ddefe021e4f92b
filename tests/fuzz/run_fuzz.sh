#!/usr/bin/env bash
# Fuzzes every parser at once: builds the libFuzzer targets (clang, ASan+UBSan) in
# build-fuzz/, then runs each for N seconds in parallel at low priority, and reports the
# executions and findings of each.
#
#   tests/fuzz/run_fuzz.sh [--seconds N] [--nice N] [--no-build] [TARGET...]
#     --seconds N   how long each target runs (default 60); all run at the same time
#     --nice N      their niceness (default 19: other work on the machine comes first)
#     --no-build    use build-fuzz/ as it is
#     TARGET        a subset, e.g. fuzz_config (default: every fuzz_* target)
#
# Needs clang and libFuzzer: deploy/install-deps.sh --fuzz. Seeds come from
# tests/fuzz/corpus/<parser>/ and are never written; what a run learns goes to
# build-fuzz/corpus/<parser>/, and the input of every finding to
# build-fuzz/findings/<parser>/ (add it to tests/fuzz/corpus/<parser>/ once fixed, so that
# the corpus regression in ctest keeps it fixed). Logs: build-fuzz/logs/<parser>.log.
# A target's per-input timeout is 300 s of wall time: at nice 19 on a busy machine an input
# can wait long for a CPU, and only a real hang should count. Exits 1 when any target found
# something, 2 on a usage error.
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds=60
niceness=19
build=1
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=${2:?--seconds needs a value}; shift 2 ;;
    --nice) niceness=${2:?--nice needs a value}; shift 2 ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    fuzz_*) targets+=("$1"); shift ;;
    *) echo "run_fuzz.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
case "$seconds" in ''|*[!0-9]*) echo "run_fuzz.sh: --seconds wants whole seconds, not '$seconds'" >&2; exit 2 ;; esac

out=build-fuzz
if [ "$build" = 1 ]; then
  launcher=()
  if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
  cmake -S . -B "$out" -DNIGHTJAR_FUZZ=ON -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNIGHTJAR_BUILD_TESTS=OFF -DNIGHTJAR_BUILD_BENCH=OFF \
    "${launcher[@]}" >/dev/null
  cmake --build "$out" -j"$(nproc 2>/dev/null || echo 2)" --target fuzz_all
fi
if [ ${#targets[@]} -eq 0 ]; then
  for d in tests/fuzz/corpus/*/; do targets+=("fuzz_$(basename "$d")"); done
fi

mkdir -p "$out/logs" "$out/tmp"
pids=()
for t in "${targets[@]}"; do
  p=${t#fuzz_}
  bin="$out/tests/fuzz/$t"
  [ -x "$bin" ] || { echo "run_fuzz.sh: $bin is not built" >&2; exit 2; }
  mkdir -p "$out/corpus/$p" "$out/findings/$p"
  # The scratch files the targets write go under the build tree too.
  TMPDIR="$PWD/$out/tmp" nice -n "$niceness" "$bin" "$out/corpus/$p" "tests/fuzz/corpus/$p" \
    -max_total_time="$seconds" -timeout=300 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$out/findings/$p/" >"$out/logs/$p.log" 2>&1 &
  pids+=($!)
done
echo "run_fuzz.sh: ${#targets[@]} targets, ${seconds} s each, at nice ${niceness}; logs in $out/logs/"

failed=0
printf '%-28s %14s %8s %s\n' target executions exec/s result
for i in "${!targets[@]}"; do
  t=${targets[$i]}
  p=${t#fuzz_}
  rc=0
  wait "${pids[$i]}" || rc=$?
  log="$out/logs/$p.log"
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -1 | awk '{print $2}')
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | tail -1 | awk '{print $2}')
  # crash-, leak-, oom- and timeout- inputs are findings. A slow-unit- input is libFuzzer's
  # note that one input took over 10 s of wall time, which at nice 19 is waiting for a CPU.
  findings=$(find "$out/findings/$p" -type f ! -name 'slow-unit-*' | wc -l)
  slow=$(find "$out/findings/$p" -type f -name 'slow-unit-*' | wc -l)
  if [ "$rc" -eq 0 ] && [ "$findings" -eq 0 ]; then
    result=ok
    if [ "$slow" -gt 0 ]; then result="ok ($slow slow-unit inputs: wall time, not a finding)"; fi
  else
    result="FINDING (exit $rc): $(find "$out/findings/$p" -type f ! -name 'slow-unit-*' -printf '%f ')"
    failed=1
  fi
  printf '%-28s %14s %8s %s\n' "$t" "${execs:-?}" "${rate:-?}" "$result"
done
exit "$failed"
