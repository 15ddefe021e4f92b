#!/usr/bin/env bash
# Issue 32, Must show 4 (tests/bench/k3_sweep.py says what it measures): a layer sweep at the
# released K3's real shapes, on the sparse layout from ../shared/tools/make_sparse_k3.py beside a
# K3-format tokenizer (both made under build/bench-models when missing, ~130 MB of disk), 4
# documents of 16 tokens at 8 GiB, against one document at a time. Needs a build and root.
#   tests/bench/run_k3_sweep.sh [k3_sweep.py options, e.g. --no-baseline --memory 8GiB]
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/bench/k3_layout.sh  # nj, model
exec /usr/bin/python3 tests/bench/k3_sweep.py --bin "$nj" --model "$model" "$@"
