# Sourced by the K3 bench scripts (run from the repository root): sets `nj` (the binary,
# NIGHTJAR_BIN or build/runner/nightjar) and `model`, the released K3's layout as sparse files
# (../shared/tools/make_sparse_k3.py, ~130 MB of disk) beside a K3-format tokenizer
# (tests/reference/k3_tokenizer_gen.py), both made under build/bench-models when missing.
nj=${NIGHTJAR_BIN:-build/runner/nightjar}
[ -x "$nj" ] || { echo "build first: $nj is missing" >&2; exit 1; }
. tests/bench/bench_models.sh
sparse=build/bench-models/k3-sparse
model=build/bench-models/k3-plan
if [ ! -f "$sparse/config.json" ]; then
  mkdir -p "$(dirname "$sparse")"
  /usr/bin/python3 ../shared/tools/make_sparse_k3.py --out "$sparse"
fi
with_k3_tokenizer "$sparse" "$model"
