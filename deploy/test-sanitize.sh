#!/usr/bin/env bash
# The unit tests under AddressSanitizer and UndefinedBehaviorSanitizer (-DNIGHTJAR_SANITIZE=ON),
# in build-asan/, beside the normal build. .ci/run runs it after deploy/test.sh.
#
# Built at -O1 without the benchmarks: the sanitizers' worth is in running our code on the
# tests' inputs (the parsers with every fuzz corpus, the store, the runner end to end, the
# kernels on the golden models), and -O1 compiles faster than -O3 while keeping the
# checks' cost moderate. Every UBSan report is fatal (-fno-sanitize-recover) and ASan's exit
# code fails the test. Tests left out, each for a reason:
#   crash_sigkill   its SIGKILLs at random instants test durability, not memory; it runs in
#                   the normal build (the sanitizer build would run it 3-4x slower)
#   store_faults    the same night per injection point, already run in the normal build
#   cli_thread_limits  limits the address space (RLIMIT_AS) to make threads fail to start;
#                   ASan's shadow memory needs terabytes of address space and aborts first
#   cli_disk_full_releases_lease  preloads an ENOSPC shim (LD_PRELOAD), which ASan must precede
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build-asan -DNIGHTJAR_SANITIZE=ON -DNIGHTJAR_BUILD_BENCH=OFF \
  -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS=-O1 -DCMAKE_C_FLAGS=-O1
cmake --build build-asan -j"$jobs"
# Leaks are bugs too: LeakSanitizer checks every test process at exit.
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -L unit -E '^(crash_sigkill|store_faults|cli_thread_limits|cli_disk_full_releases_lease)$'
