#!/usr/bin/env bash
# Quick start: install what is missing, build the kvbench binary (Release, build/), run the
# default suite (nightly) into kvbench-results/results.sqlite, print its summary and write its
# report to kvbench-results/report/index.html. Arguments
# go to `kvbench run` (e.g. --suite smoke for a first look in seconds). The tests are
# ci/test.sh's job: only the binary this script runs is built.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '\nquickstart: %s\n' "$*"; }

say "1/4 installing missing Debian packages (ci/install-deps.sh)"
bash ci/install-deps.sh

say "2/4 building build/bin/kvbench (Release)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target kvbench

say "3/4 running the suite into kvbench-results/results.sqlite (progress on stderr; the nightly takes 7 to 10 minutes on 2 cores)"
mkdir -p kvbench-results
status=0
./build/bin/kvbench run --db kvbench-results/results.sqlite "$@" || status=$?
say "results in kvbench-results/results.sqlite: kvbench list runs, kvbench show latest, kvbench export latest"

say "4/4 writing the run's report"
if ./build/bin/kvbench report --db kvbench-results/results.sqlite --run latest --out kvbench-results/report; then
  say "report: $(pwd)/kvbench-results/report/index.html (open it in a browser; it needs no network)"
else
  say "no report written (see above)"
fi
exit "$status"
