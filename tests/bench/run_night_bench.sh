#!/usr/bin/env bash
# Issue 14's benchmark: a night's classify and generate jobs, batched against one item at a
# time, next to `nightjar plan SPEC`'s predictions (tests/bench/bench_night.py says what it
# measures). Two models, each streaming-bound where its job runs:
#   classify  build/bench-models/night-cls, from tests/reference/make_model.py (3.2 GB: hidden
#             1024, 8 layers, 256 MXFP4 experts top-8 with a near-uniform router, a K3-format
#             tokenizer): one document at a time reads most experts every 64-row pass, so it
#             waits on the disk, while a window of documents reads each expert once per pass;
#   generate  build/bench-models/night-8g: links to bench-8g's files (the shared K3-shaped
#             model from ../shared/tools/make_bench_ckpt.py; 9.35 GB) beside a K3-format
#             tokenizer: its 1.7 GB trunk, which a decode batch shares, is most of what a
#             token reads at a small budget.
# Both are generated when missing (check free disk: ~13 GB with bench-8g).
# Needs a build (build/runner/nightjar, build/tests/bench/batch_bench) and root for dropping
# the page cache.
#   tests/bench/run_night_bench.sh [--bench-8g DIR] [bench_night.py options, e.g. --docs 64]
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/bench/bench_models.sh
bench8g=build/bench-models/bench-8g
if [ "${1:-}" = "--bench-8g" ]; then bench8g=$2; shift 2; fi
bench8g_with_tokenizer "$bench8g"  # sets model
cls=build/bench-models/night-cls
[ -f "$cls/config.json" ] || need_free 6 build "$cls (3.2 GB)"
/usr/bin/python3 tests/reference/make_model.py --out "$cls" --if-missing --preset small --tokenizer \
  --hidden 1024 --layers 8 --experts-n 256 --top-k 8 --latent 1024 --moe-inter 1024 \
  --router-gain 0.25 --router-bias 0.01 > /dev/null
exec /usr/bin/python3 tests/bench/bench_night.py --bin build/runner/nightjar --model "$model" \
  --classify-model "$cls" "$@"
