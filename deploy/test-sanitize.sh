#!/usr/bin/env bash
# Our code under AddressSanitizer (with LeakSanitizer) and UndefinedBehaviorSanitizer
# (-DNIGHTJAR_SANITIZE=ON), in build-asan/, beside the normal build. .ci/run runs it after
# deploy/test.sh, which has already run every test in the normal build; this stage runs the
# tests whose inputs reach code the sanitizers can judge, and no more, to keep CI short:
#   - every Catch2 test (engine, kernels on every SIMD level, store, parsers, state files);
#   - every fuzz target over its committed corpus (the parsers with hostile inputs);
#   - the runner end to end, with its threads: cli_run_batch (batches, joins, cancel, fail,
#     --until, two runs sharing a home), cli_submit, cli_validate, cli_report,
#     cli_fifo_inputs, cli_smaller_findings, cli_non_finite_logits, cli_numerics_version,
#     cli_output_write_failures, and (issue 34) cli_item_control (per-item cancel and retry in
#     the store), cli_morning_report (the report's text, JSON and HTML), cli_edges (the
#     command line's errors, a damaged model, run's JSON summary).
# Left to the normal build: the Python-only tests (reference_*, schema_contract, the
# tokenizer generator), the long CLI suites whose code paths the tests above already cover
# (cli_run, cli_classify, cli_state, cli_generate_batch, cli_openai_batch, cli_array,
# cli_outputs_overwrite, cli_openai_examples, cli_doctor, cli_tokenize: 3-4x slower here;
# and, measured here on 2026-12-02 at 410, 155, 100 and 79 s of the stage's 889 s,
# cli_plan_spec, cli_backoff_and_stalled, cli_speculative, cli_classify_resume; and
# cli_run_speculative, whose engine and runner paths the [runner][spec] Catch2 test runs here;
# cli_sweep_crash, whose boundary files and resumes the [sweep] Catch2 tests run here and
# whose runner path cli_sweep does),
# install_prefix and report_screenshot (cmake --install, and a browser rendering the page
# cli_morning_report already builds here), and these, that cannot or need not run under the
# sanitizers:
#   crash_sigkill, crash_sigkill_speculative   SIGKILLs at random instants test durability,
#                   not memory
#   store_faults    the same night per injection point, already run in the normal build
#   cli_thread_limits  limits the address space (RLIMIT_AS) to make threads fail to start;
#                   ASan's shadow memory needs terabytes of address space and aborts first
#   cli_disk_full_releases_lease  preloads an ENOSPC shim (LD_PRELOAD), which ASan must precede
#   crash_attempts, crash_soak_short  SIGKILLs, as crash_sigkill (the reclaim rule they test is
#                   run here by the [runner][queue] Catch2 tests)
#   cli_hardening_round2  limits the address space (RLIMIT_AS) as cli_thread_limits does, and
#                   reads 16 MiB inputs; its output-path rule is the [jobs][outputs] Catch2 test
# Built with clang (installed by deploy/install-deps.sh --sanitize), without the benchmarks,
# at -O0 but for the engine at -O1: the runner's and the tests' files instantiate much of
# CLI11, nlohmann/json and the standard library, and instrumenting them at -O1 made this
# build the longest step of CI. CPU time of the whole build, measured 2026-12-02 with a
# per-file timer: gcc -O1 1903 s, clang -O1 1291 s; one runner file (cmd_merge.cpp): gcc -O1
# 38 s, clang -O1 20 s, clang -O0 10 s. The engine stays at -O1 because the tests spend their
# minutes in its kernels. A second compiler also checks the code under clang's warnings.
# The batch tests run one thread count here (tests/unit/sanitized.h).
# Every UBSan report is fatal (-fno-sanitize-recover) and ASan's exit code fails the test.
set -euo pipefail
cd "$(dirname "$0")/.."

deploy/install-deps.sh --sanitize
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build-asan -DNIGHTJAR_SANITIZE=ON -DNIGHTJAR_BUILD_BENCH=OFF \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS=-O0 -DCMAKE_C_FLAGS=-O0 -DNIGHTJAR_ENGINE_FLAGS=-O1
cmake --build build-asan -j"$jobs"
python_only='reference_.*|schema_contract'
long_cli='cli_run|cli_classify|cli_state|cli_generate_batch|cli_openai_batch|cli_array|cli_outputs_overwrite|cli_openai_examples|cli_doctor|cli_tokenize'
long_cli+='|cli_plan_spec|cli_backoff_and_stalled|cli_speculative|cli_classify_resume|cli_run_speculative'
long_cli+='|cli_sweep_crash|install_prefix|report_screenshot'
cannot='crash_sigkill|crash_sigkill_speculative|store_faults|cli_thread_limits|cli_disk_full_releases_lease'
cannot+='|crash_attempts|crash_soak_short|crash_soak|cli_hardening_round2'
# Leaks are bugs too: LeakSanitizer checks every test process at exit.
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -L unit -E "^(${python_only}|${long_cli}|${cannot})\$"
