#!/usr/bin/env bash
# Quick start: install what is missing, build Release in build/, run the default suite
# (nightly: four workloads x three policies x five repetitions, about 9 minutes on 2 cores) into
# kvbench-results/results.sqlite and print its summary.
set -euo pipefail
cd "$(dirname "$0")/.."

bash ci/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"

mkdir -p kvbench-results
./build/bin/kvbench run --db kvbench-results/results.sqlite "$@"
echo "quickstart: results in kvbench-results/results.sqlite (kvbench list runs / show RUN_ID / export RUN_ID)"
