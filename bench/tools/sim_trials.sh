#!/bin/bash
# The sim clock's trial on bench/suites/gate-trial.json (one case): ROUNDS sim runs on an idle
# machine, ROUNDS with one core kept 100% busy by a spinning process, then one run with each
# planted slowdown defined in work (test_repeat_attention 0.05 and 0.25). Prints each run's
# decode and prefill counts, then how many distinct values each count took over the idle and
# busy runs (1: identical) and what the planted slowdowns moved.
#   bench/tools/sim_trials.sh DIR [ROUNDS] [--repetitions N]
# Run from the repository root; KVBENCH=path overrides the binary (a candidate build's counts go
# beside the baseline's in DIR/trials.sqlite: compare them with `kvbench compare`).
set -u
kvbench=$(realpath "${KVBENCH:-build/bin/kvbench}")
suite=$(realpath bench/suites/gate-trial.json)
dir=${1:?usage: bench/tools/sim_trials.sh DIR [ROUNDS] [--repetitions N]}
shift
rounds=5
repetitions=1
while [ $# -gt 0 ]; do
  case "$1" in
    --repetitions) repetitions=${2:?--repetitions N}; shift ;;
    *[!0-9]*) echo "sim_trials.sh: $1: unknown argument" >&2; exit 2 ;;
    *) rounds=$1 ;;
  esac
  shift
done
mkdir -p "$dir" && cd "$dir" || exit 2
db=trials.sqlite
for share in 0.05 0.25; do
  sed "s/\"sample_every\": 8}}/\"sample_every\": 8}, \"test_repeat_attention\": $share}/" "$suite" >"repeat-$share.json"
done
run() {  # $1: suite file, $2: label; prints the run id
  local start=$SECONDS
  "$kvbench" run --suite "$1" --db "$db" --sim --repetitions "$repetitions" --tag "$2" --json >"run-$2-$RANDOM.json" 2>>runs.log || {
    echo "sim_trials.sh: the $2 run failed (runs.log)" >&2; exit 1; }
  local id
  id=$(sqlite3 "$db" "SELECT max(id) FROM runs")
  echo "$id $2 $((SECONDS - start))" >>runs.txt
  echo "$id"
}
count() {  # $1: run id, $2: metric
  sqlite3 "$db" "SELECT group_concat(CAST(value AS INTEGER), ',') FROM metric_values WHERE run_id = $1 AND name = '$2'"
}
show() {  # $1: run id, $2: label
  printf '%-6s run %-3s  decode: %s instructions, %s L1 misses, %s LL misses;  prefill: %s instructions, %s L1 misses, %s LL misses  (%s s)\n' \
    "$2" "$1" "$(count "$1" span_decode_total_sim_instructions)" "$(count "$1" span_decode_total_sim_l1_misses)" \
    "$(count "$1" span_decode_total_sim_ll_misses)" "$(count "$1" span_prefill_total_sim_instructions)" \
    "$(count "$1" span_prefill_total_sim_l1_misses)" "$(count "$1" span_prefill_total_sim_ll_misses)" \
    "$(awk -v id="$1" '$1 == id {print $3}' runs.txt)"
}
rm -f "$db" runs.txt runs.log
ids=()
for i in $(seq 1 "$rounds"); do
  id=$(run "$suite" idle); ids+=("$id"); show "$id" idle
done
timeout 7200 sh -c 'while :; do :; done' &
spinner=$!
trap 'kill $spinner 2>/dev/null' EXIT
for i in $(seq 1 "$rounds"); do
  id=$(run "$suite" busy); ids+=("$id"); show "$id" busy
done
kill $spinner 2>/dev/null
in_list=$(IFS=,; echo "${ids[*]}")
echo "distinct values over the ${#ids[@]} runs above (1: every run counted the same):"
sqlite3 "$db" "SELECT '  ' || name || ': ' || count(DISTINCT value) || ' (' || CAST(min(value) AS INTEGER) || ' .. ' || CAST(max(value) AS INTEGER) || ')'
  FROM metric_values WHERE run_id IN ($in_list) AND clock = 'sim' AND value IS NOT NULL AND name LIKE '%_total_sim_%' GROUP BY name ORDER BY name"
for share in 0.05 0.25; do
  id=$(run "repeat-$share.json" "repeat-$share"); show "$id" "x$share"
  sqlite3 "$db" "SELECT '  test_repeat_attention $share: ' || b.name || ' ' || CAST(a.value AS INTEGER) || ' -> ' || CAST(b.value AS INTEGER) ||
    printf(' (%+.2f%%)', 100.0 * (b.value - a.value) / a.value)
    FROM metric_values a JOIN metric_values b ON a.name = b.name AND a.case_name = b.case_name AND a.repetition = b.repetition
    WHERE a.run_id = ${ids[0]} AND b.run_id = $id AND a.repetition = 1 AND b.name IN
      ('span_decode_total_sim_instructions', 'span_decode_attend_sim_instructions', 'span_prefill_total_sim_instructions')"
done
