#!/bin/bash
# The gate's trial on real runs of bench/suites/gate-trial.json (one case, 5 repetitions):
# per round a baseline run, an A/A candidate and a test_slowdown 0.25 candidate, both gated
# against the baseline; then the same pair through `kvbench ab`. Prints one line per round and
# the rates: A/A passing (exit 0), slowdown regressed (exit 1), each side's exit codes (5: noise
# left a span undecided), and repetitions flagged noisy.
#   bench/tools/gate_trials.sh DIR [ROUNDS] [--busy] [--gate-only|--ab-only]
# --busy keeps one core 100% busy with a spinning process for the whole trial.
# Run from the repository root; KVBENCH=path overrides the binary.
set -u
kvbench=$(realpath "${KVBENCH:-build/bin/kvbench}")
suite=$(realpath bench/suites/gate-trial.json)
dir=${1:?usage: bench/tools/gate_trials.sh DIR [ROUNDS] [--busy] [--gate-only|--ab-only]}
rounds=20
busy=0; gate=1; ab=1
shift
for arg in "$@"; do
  case "$arg" in
    --busy) busy=1 ;;
    --gate-only) ab=0 ;;
    --ab-only) gate=0 ;;
    *[!0-9]*) echo "gate_trials.sh: $arg: unknown argument" >&2; exit 2 ;;
    *) rounds=$arg ;;
  esac
done
mkdir -p "$dir" && cd "$dir" && rm -f trials.sqlite ab.sqlite
sed 's/"sample_every": 8}}/"sample_every": 8}, "test_slowdown": 0.25}/' "$suite" >slow.json
spinner=""
if [ $busy -eq 1 ]; then
  timeout 3600 sh -c 'while :; do :; done' &
  spinner=$!
  trap 'kill $spinner 2>/dev/null' EXIT
fi
run() { "$kvbench" run --suite "$1" --db trials.sqlite --json >/dev/null 2>&1 && sqlite3 trials.sqlite "SELECT max(id) FROM runs"; }
aa_pass=0; slow_regressed=0; ab_aa_pass=0; ab_slow_regressed=0
aa_exits=""; slow_exits=""; ab_aa_exits=""; ab_slow_exits=""
for i in $(seq 1 "$rounds"); do
  line="round $i:"
  if [ $gate -eq 1 ]; then
    a=$(run "$suite"); b=$(run "$suite"); c=$(run slow.json)
    "$kvbench" gate --baseline "$a" --candidate "$b" --db trials.sqlite >aa-"$i".txt 2>&1; aa=$?
    "$kvbench" gate --baseline "$a" --candidate "$c" --db trials.sqlite >slow-"$i".txt 2>&1; sl=$?
    [ "$aa" -eq 0 ] && aa_pass=$((aa_pass + 1))
    [ "$sl" -eq 1 ] && slow_regressed=$((slow_regressed + 1))
    aa_exits="$aa_exits $aa"; slow_exits="$slow_exits $sl"
    line="$line gate A/A exit $aa, slowdown exit $sl;"
  fi
  if [ $ab -eq 1 ]; then
    "$kvbench" ab --baseline-bin "$kvbench" --candidate-bin "$kvbench" --suite "$suite" --db ab.sqlite >ab-aa-"$i".txt 2>/dev/null; x=$?
    "$kvbench" ab --baseline-bin "$kvbench" --candidate-bin "$kvbench" --suite "$suite" --candidate-suite slow.json \
      --db ab.sqlite >ab-slow-"$i".txt 2>/dev/null; y=$?
    [ "$x" -eq 0 ] && ab_aa_pass=$((ab_aa_pass + 1))
    [ "$y" -eq 1 ] && ab_slow_regressed=$((ab_slow_regressed + 1))
    ab_aa_exits="$ab_aa_exits $x"; ab_slow_exits="$ab_slow_exits $y"
    line="$line ab A/A exit $x, slowdown exit $y"
  fi
  echo "$line"
done
noisy() {
  [ -f "$1" ] || { echo "-"; return; }
  sqlite3 "$1" "SELECT sum(noisy) || ' of ' || count(*) FROM metric_values WHERE name = 'tpot_ms_p50' AND clock = 'host'"
}
# "exit 0 x18, 5 x2"
tally() { echo "$1" | tr ' ' '\n' | grep . | sort -n | uniq -c | awk '{printf "%s%s x%s", sep, $2, $1; sep=", "}'; }
[ $gate -eq 1 ] && echo "gate: A/A passed $aa_pass of $rounds (exits $(tally "$aa_exits")); slowdown 0.25 regressed $slow_regressed of $rounds (exits $(tally "$slow_exits")); noisy repetitions $(noisy trials.sqlite)"
[ $ab -eq 1 ] && echo "ab: A/A passed $ab_aa_pass of $rounds (exits $(tally "$ab_aa_exits")); slowdown 0.25 regressed $ab_slow_regressed of $rounds (exits $(tally "$ab_slow_exits")); noisy repetitions $(noisy ab.sqlite)"
exit 0
