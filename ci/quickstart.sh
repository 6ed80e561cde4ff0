#!/usr/bin/env bash
# Quick start: install what is missing, build Release in build/, run the default suite into
# kvbench-results/ and print its summary.
set -euo pipefail
cd "$(dirname "$0")/.."

bash ci/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"

mkdir -p kvbench-results
if ./build/bin/kvbench run --help >/dev/null 2>&1; then
  ./build/bin/kvbench run --db kvbench-results/results.sqlite
else
  # Until the harness can run suites (issue 6), show what the engine build can do: the
  # version, its kernel paths, and the decode microbenchmark at 4K context.
  ./build/bin/kvbench version
  ./build/bin/kvbench-micro --benchmark_filter='BM_DecodeAttention/(f16|q8|q4)/4096' \
    --benchmark_min_time=0.5 --benchmark_out=kvbench-results/micro.json --benchmark_out_format=json
  echo "quickstart: microbenchmark results in kvbench-results/micro.json"
fi
