#!/usr/bin/env bash
# The README's test command. On a fresh Debian machine it installs what is missing,
# configures a Release build in build/, builds, and runs the test suite.
#   deploy/test.sh            the default suite (everything but tests labelled 'large')
#   deploy/test.sh --all      also the large-model tests
set -euo pipefail
cd "$(dirname "$0")/.."

labels=(-LE large)
if [ "${1:-}" = "--all" ]; then labels=(); fi

deploy/install-deps.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs" "${labels[@]}"
