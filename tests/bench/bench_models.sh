# Sourced by the bench scripts (run from the repository root): the generated models they share,
# under build/bench-models, made when missing.

# need_free GB DIR WHAT: stop unless DIR's filesystem has GB free for generating WHAT.
need_free() {
  local free_kb
  free_kb=$(df -Pk "$2" 2>/dev/null | awk 'NR==2 {print $4}' || echo 0)
  if [ "${free_kb:-0}" -lt $(($1 * 1024 * 1024)) ]; then
    echo "need $1 GB free under $2 to generate $3" >&2; exit 1
  fi
}

# with_k3_tokenizer SRC DST: DST holds links to SRC's files beside a K3-format tokenizer
# (tests/reference/k3_tokenizer_gen.py: a small vocabulary with K3's special-token layout).
with_k3_tokenizer() {
  [ -f "$2/tiktoken.model" ] && return 0
  mkdir -p "$2"
  for f in "$1"/*; do ln -sf "$(realpath "$f")" "$2/"; done
  /usr/bin/python3 tests/reference/k3_tokenizer_gen.py "$2" > /dev/null
}

# bench8g_with_tokenizer DIR: sets `model` to build/bench-models/night-8g, bench-8g in DIR
# (../shared/tools/make_bench_ckpt.py, 9.35 GB, made when missing) beside a K3-format tokenizer.
bench8g_with_tokenizer() {
  if [ ! -f "$1/config.json" ]; then
    mkdir -p "$(dirname "$1")"
    need_free 20 "$(dirname "$1")" "bench-8g (9.35 GB)"
    /usr/bin/python3 ../shared/tools/make_bench_ckpt.py --out "$1"
  fi
  model=build/bench-models/night-8g
  with_k3_tokenizer "$1" "$model"
}
