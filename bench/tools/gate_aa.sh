#!/bin/bash
# The gate on real runs: 20 A/A gates (two identical runs of bench/suites/gate-one-case.json)
# and 20 gates against the same suite with test_slowdown 0.25, alternating the runs.
#   bench/tools/gate_aa.sh DIR      (run from the repository root; KVBENCH=path overrides the binary)
set -u
kvbench=$(realpath "${KVBENCH:-build/bin/kvbench}")
suite=$(realpath bench/suites/gate-one-case.json)
dir=${1:?usage: bench/tools/gate_aa.sh DIR}
mkdir -p "$dir" && cd "$dir" && rm -f aa.sqlite
cp "$suite" base.json
sed 's/"sample_every": 8}}/"sample_every": 8}, "test_slowdown": 0.25}/' base.json >slow.json
run() { "$kvbench" run --suite "$1" --db aa.sqlite --json >/dev/null 2>&1 && sqlite3 aa.sqlite "SELECT max(id) FROM runs"; }
failing=0; detected=0
for i in $(seq 1 20); do
  a=$(run base.json); b=$(run base.json); c=$(run slow.json)
  "$kvbench" gate --baseline "$a" --candidate "$b" --db aa.sqlite >aa-"$i".txt 2>&1; aa=$?
  "$kvbench" gate --baseline "$a" --candidate "$c" --db aa.sqlite >ab-"$i".txt 2>&1; ab=$?
  [ "$aa" -eq 1 ] && failing=$((failing + 1))
  [ "$ab" -eq 1 ] && detected=$((detected + 1))
  echo "round $i: A/A exit $aa, slowdown 0.25 exit $ab"
done
echo "A/A failing gates: $failing of 20; slowdown 0.25 detected: $detected of 20"
