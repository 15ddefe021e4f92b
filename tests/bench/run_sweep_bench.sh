#!/usr/bin/env bash
# Issue 32's benchmark (tests/bench/bench_sweep.py says what it measures): a classify job of 48
# documents of ~100-200 tokens at 600 MiB on bench-8g (the shared K3-shaped model from
# ../shared/tools/make_bench_ckpt.py, 9.35 GB) beside a K3-format tokenizer, through layer sweeps,
# token-major windows and one document at a time, cold cache, each against `plan SPEC`.
# bench-8g is generated when missing (check free disk: ~10 GB). Needs a build and root (page cache).
#   tests/bench/run_sweep_bench.sh [--bench-8g DIR] [bench_sweep.py options, e.g. --schedules sweep,passes]
set -euo pipefail
cd "$(dirname "$0")/../.."
bench8g=build/bench-models/bench-8g
if [ "${1:-}" = "--bench-8g" ]; then bench8g=$2; shift 2; fi
. tests/bench/bench_models.sh
bench8g_with_tokenizer "$bench8g"  # sets model
exec /usr/bin/python3 tests/bench/bench_sweep.py --bin build/runner/nightjar --model "$model" "$@"
