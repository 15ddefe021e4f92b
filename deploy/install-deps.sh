#!/usr/bin/env bash
# Installs, from Debian packages, everything Nightjar needs to build, run and test.
# Idempotent: when every package is already present it changes nothing and makes no
# network request. Fails loudly (non-zero, naming the packages) when it cannot install.
#   deploy/install-deps.sh            the build, run and test dependencies
#   deploy/install-deps.sh --slurm    also Slurm and MUNGE (tests/slurm/run.sh starts its own
#                                     daemons; the packages' services are not configured here)
#   deploy/install-deps.sh --fuzz     also clang with its libFuzzer and sanitizer runtimes and
#                                     OpenMP, for tests/fuzz/run_fuzz.sh (-DNIGHTJAR_FUZZ=ON)
#   deploy/install-deps.sh --sanitize the same clang packages, for deploy/test-sanitize.sh
#   deploy/install-deps.sh --browser  also Chromium (development only, not a build or test
#                                     dependency): tests/tools/report_screenshot.sh renders
#                                     the HTML morning report headless and checks it
set -euo pipefail

slurm=0
fuzz=0
browser=0
for arg in "$@"; do
  case "$arg" in
    --slurm) slurm=1 ;;
    --fuzz | --sanitize) fuzz=1 ;;
    --browser) browser=1 ;;
    *) echo "usage: deploy/install-deps.sh [--slurm] [--fuzz] [--sanitize] [--browser] (unknown argument '$arg')" >&2; exit 2 ;;
  esac
done

packages=(
  g++ cmake make pkg-config           # toolchain
  libsqlite3-dev                      # runner: the job store
  libyaml-cpp-dev                     # jobs: spec parsing
  libspdlog-dev                       # logging (all layers)
  nlohmann-json3-dev                  # JSON: configs, headers, --output json
  libcli11-dev                        # command line
  libxxhash-dev                       # checksums and fingerprints
  catch2                              # unit tests (v2)
  python3 python3-numpy               # tests/reference: the independent numpy model
  python3-jsonschema python3-yaml     # tests/schema, tests/cli: spec and output contracts
)
# Node.js and npm run the tokenizer parity test and benchmark against npm's tiktoken.
# Only when the commands are missing: a machine may have them from elsewhere (e.g.
# NodeSource's nodejs, which bundles npm and conflicts with Debian's npm package).
if ! command -v node >/dev/null 2>&1; then packages+=(nodejs); fi
if ! command -v npm >/dev/null 2>&1; then packages+=(npm); fi
# Slurm's controller, node daemon and client commands, and MUNGE (Slurm's authentication).
if [ "$slurm" = 1 ]; then packages+=(slurm-wlm munge); fi
# The fuzzers and the sanitizer build: clang 14 (Debian's default), its runtimes
# (libclang_rt.fuzzer, asan, ubsan) and its OpenMP (the engine links OpenMP).
if [ "$fuzz" = 1 ]; then packages+=(clang libclang-rt-14-dev libomp-14-dev); fi
# Headless Chromium, for the report's screenshot check (development only).
if [ "$browser" = 1 ]; then packages+=(chromium); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing: ${missing[*]}"
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
  else
    echo "install-deps: ERROR: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
if ! "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"; then
  # The package lists may be stale or absent on a fresh machine: refresh once and retry.
  "${sudo[@]}" apt-get update || { echo "install-deps: ERROR: apt-get update failed" >&2; exit 1; }
  "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}" || {
    echo "install-deps: ERROR: could not install: ${missing[*]}" >&2
    exit 1
  }
fi

for p in "${missing[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    echo "install-deps: ERROR: $p is still not installed" >&2
    exit 1
  fi
done
echo "install-deps: done"
