#!/usr/bin/env bash
# The engine benchmark of issue 3: a ~1 GB RAM-resident K3-shaped model (generated under
# build/bench-models/ if absent), decode tokens/s, and the BF16 / MXFP4 matrix-vector kernels
# against a memory-bandwidth probe taken in the same run. Run after a build:
#   tests/bench/run_engine_bench.sh [--threads N]
set -euo pipefail
cd "$(dirname "$0")/../.."
threads=2
if [ "${1:-}" = "--threads" ]; then threads=$2; fi
model=build/bench-models/bench-1g
if [ ! -f "$model/config.json" ]; then
  /usr/bin/python3 tests/reference/make_model.py --out "$model" --preset k3-mini --layers 12 \
    --vocab 32768 --experts-n 128 --full-attn-layers 4,8,11,12 --block-size 4 --force
fi
build/tests/bench/decode_bench --model "$model" --tokens 32 --threads "$threads"
echo
build/tests/bench/kernel_bench --threads "$threads"
