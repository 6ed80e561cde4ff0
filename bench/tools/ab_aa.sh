#!/bin/bash
# kvbench ab on real runs, one binary as both sides: 10 A/A rounds of bench/suites/gate-one-case.json
# and 10 rounds against the same suite with test_slowdown 0.25 (--candidate-suite), each gated.
#   bench/tools/ab_aa.sh DIR      (run from the repository root; KVBENCH=path overrides the binary)
set -u
kvbench=$(realpath "${KVBENCH:-build/bin/kvbench}")
suite=$(realpath bench/suites/gate-one-case.json)
dir=${1:?usage: bench/tools/ab_aa.sh DIR}
mkdir -p "$dir" && cd "$dir" && rm -f ab.sqlite
sed 's/"sample_every": 8}}/"sample_every": 8}, "test_slowdown": 0.25}/' "$suite" >slow.json
failing=0; detected=0
for i in $(seq 1 10); do
  for kind in aa ab; do
    candidate=$suite; [ "$kind" = ab ] && candidate=slow.json
    start=$(date +%s.%N)
    "$kvbench" ab --baseline-bin "$kvbench" --candidate-bin "$kvbench" --suite "$suite" --candidate-suite "$candidate" \
      --db ab.sqlite >"$kind-$i.txt" 2>/dev/null
    seconds=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
    base=$(sqlite3 ab.sqlite "SELECT max(id) FROM runs WHERE tags = 'ab:baseline'")
    cand=$(sqlite3 ab.sqlite "SELECT max(id) FROM runs WHERE tags = 'ab:candidate'")
    "$kvbench" gate --baseline "$base" --candidate "$cand" --db ab.sqlite >"$kind-$i-gate.txt" 2>&1
    rc=$?
    if [ "$kind" = aa ]; then [ $rc -eq 1 ] && failing=$((failing + 1)); else [ $rc -eq 1 ] && detected=$((detected + 1)); fi
    echo "round $i $kind: gate exit $rc, ab round ${seconds} s"
  done
done
echo "A/A failing gates: $failing of 10; slowdown 0.25 detected: $detected of 10"
