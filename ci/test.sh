#!/usr/bin/env bash
# Every test step kvbench has: install dependencies, build each tree it needs, run the tests.
#   1. Release build (build/): unit tests and end-to-end tests through CTest.
#   2. AddressSanitizer + UndefinedBehaviorSanitizer build (build-asan/, -O1): unit tests.
#   3. Compile-only check of engine/ for aarch64 (build-aarch64/) with Debian's cross g++.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
step() { printf '\n=== %s ===\n' "$*"; }

step "dependencies"
bash ci/install-deps.sh

step "release build"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"

step "release tests"
ctest --test-dir build --output-on-failure -j"$jobs"

step "slow tests hidden with [.] (Release)"
build/bin/kvbench-tests "[perplexity]"

step "asan+ubsan build"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DKVBENCH_SANITIZE=address,undefined -DKVBENCH_BUILD_BENCH=OFF >/dev/null
cmake --build build-asan -j"$jobs" --target kvbench-tests kvbench

step "asan+ubsan tests"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs"

step "aarch64 cross-compile of engine/"
cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=ci/aarch64-toolchain.cmake -DCMAKE_BUILD_TYPE=Release \
  -DKVBENCH_ENGINE_ONLY=ON >/dev/null
cmake --build build-aarch64 -j"$jobs"

step "all test steps passed"
