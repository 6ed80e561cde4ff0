#!/usr/bin/env bash
# Quick start: install what is missing, build Release in build/, run the default suite into
# kvbench-results/ and print its summary.
set -euo pipefail
cd "$(dirname "$0")/.."

bash ci/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"

mkdir -p kvbench-results
if ./build/bin/kvbench --help | grep -qE '^ +run( |$)'; then
  ./build/bin/kvbench run --db kvbench-results/results.sqlite
else
  # Until the harness can run suites (issue 6), show what the build can do: the version and
  # kernel paths, the decode microbenchmark at 4K context, the synthetic generator's
  # statistics, and the accuracy of q4 KV on the real model (two windows).
  ./build/bin/kvbench version
  ./build/bin/kvbench-micro --benchmark_filter='BM_DecodeAttention/(f16|q8|q4)/4096' \
    --benchmark_min_time=0.5 --benchmark_out=kvbench-results/micro.json --benchmark_out_format=json
  ./build/bin/kvbench synth-stats --preset qwen-0.5b-gqa --ctx 8192 | tee kvbench-results/synth-stats.txt
  models=../shared/models
  if [ -f "$models/stories260K.bin" ]; then
    ./build/bin/kvbench score --model "$models/stories260K.bin" --tokenizer "$models/tok512.bin" \
      --text "$models/tinystories-sample.txt" --k q4 --v q4 --page-tokens 16 --max-windows 2 | tee kvbench-results/score.txt
  fi
  echo "quickstart: results in kvbench-results/ (micro.json, synth-stats.txt, score.txt)"
fi
