#!/bin/bash
# The gate's trial on the sim clock: bench/suites/gate-trial.json (one case) run with --sim, per
# round a baseline run, an A/A candidate and two candidates with a slowdown defined in work
# (test_repeat_attention 0.25 and 0.05), each candidate gated against the round's baseline. Prints
# one line per round and the rates: A/A passing (exit 0), each slowdown regressed (exit 1) naming
# a decode sim row.
#   bench/tools/sim_gate_trials.sh DIR [ROUNDS] [--busy]
# --busy keeps one core 100% busy with a spinning process for the whole trial.
# Run from the repository root; KVBENCH=path overrides the binary.
set -u
kvbench=$(realpath "${KVBENCH:-build/bin/kvbench}")
suite=$(realpath bench/suites/gate-trial.json)
dir=${1:?usage: bench/tools/sim_gate_trials.sh DIR [ROUNDS] [--busy]}
shift
rounds=20
busy=0
for arg in "$@"; do
  case "$arg" in
    --busy) busy=1 ;;
    *[!0-9]*) echo "sim_gate_trials.sh: $arg: unknown argument" >&2; exit 2 ;;
    *) rounds=$arg ;;
  esac
done
mkdir -p "$dir" && cd "$dir" || exit 2
rm -f trials.sqlite
for share in 0.25 0.05; do
  sed "s/\"sample_every\": 8}}/\"sample_every\": 8}, \"test_repeat_attention\": $share}/" "$suite" >"repeat-$share.json"
done
spinner=""
if [ $busy -eq 1 ]; then
  timeout 36000 sh -c 'while :; do :; done' &
  spinner=$!
  trap 'kill $spinner 2>/dev/null' EXIT
fi
run() { "$kvbench" run --suite "$1" --db trials.sqlite --sim --repetitions 1 --json >/dev/null 2>>runs.log && sqlite3 trials.sqlite "SELECT max(id) FROM runs"; }
# gate exit code, and whether its output names a regressed decode sim row
gate() {  # $1 baseline, $2 candidate, $3 output file
  "$kvbench" gate --baseline "$1" --candidate "$2" --db trials.sqlite >"$3" 2>&1
  local rc=$?
  local named=no
  grep -q "^regressed .* span_decode_total_sim_instructions: " "$3" && named=yes
  echo "$rc $named"
}
aa_pass=0; slow25=0; slow05=0; start=$SECONDS
for i in $(seq 1 "$rounds"); do
  a=$(run "$suite"); b=$(run "$suite"); c=$(run repeat-0.25.json); d=$(run repeat-0.05.json)
  read -r aa _ < <(gate "$a" "$b" "aa-$i.txt")
  read -r s25 n25 < <(gate "$a" "$c" "slow25-$i.txt")
  read -r s05 n05 < <(gate "$a" "$d" "slow05-$i.txt")
  [ "$aa" -eq 0 ] && aa_pass=$((aa_pass + 1))
  [ "$s25" -eq 1 ] && [ "$n25" = yes ] && slow25=$((slow25 + 1))
  [ "$s05" -eq 1 ] && [ "$n05" = yes ] && slow05=$((slow05 + 1))
  change() { grep -o "span_decode_total_sim_instructions: [0-9,]* -> [0-9,]* +[0-9,]* ([-+0-9.]*%)" "$1" | head -1; }
  echo "round $i ($((SECONDS - start)) s): A/A exit $aa; repeat 0.25 exit $s25 ($(change "slow25-$i.txt")); repeat 0.05 exit $s05 ($(change "slow05-$i.txt"))"
done
echo "A/A passed $aa_pass of $rounds; repeat 0.25 regressed $slow25 of $rounds; repeat 0.05 regressed $slow05 of $rounds (a decode sim row named)$([ $busy -eq 1 ] && echo ", one core kept busy")"
echo "distinct decode instruction counts over the baselines and A/A candidates: $(sqlite3 trials.sqlite "SELECT count(DISTINCT value) FROM metric_values WHERE name = 'span_decode_total_sim_instructions' AND run_id IN (SELECT id FROM runs WHERE config_json NOT LIKE '%test_repeat_attention%')")"
exit 0
