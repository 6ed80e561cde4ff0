#!/bin/bash
# Planted changes seen by host CPU time and by the sim clock, side by side, on
# bench/suites/gate-trial.json (one case): per change, a host run (the suite's 5 repetitions and
# warmup) and a sim run (one repetition) of the candidate, each gated against the baseline
# binary's runs of the plain suite. Prints one Markdown table row per change: the gate's exit
# and its decode row on each clock (span_decode_total_cpu_ms, span_decode_total_sim_instructions).
#   bench/tools/planted_changes.sh DIR [--busy] [LABEL=BINARY[:POLICY_FIELDS]]...
# A change is a label, the candidate binary and optionally policy fields added to the suite's
# policy ("test_repeat_attention": 0.05). Without changes, the planted ones of docs/gate.md:
# test_repeat_attention 0.05 and 0.25 and test_slowdown 0.25 on the baseline binary.
# --busy keeps one core 100% busy with a spinning process for the whole trial.
# Run from the repository root; KVBENCH=path is the baseline binary (default build/bin/kvbench).
set -u
kvbench=$(realpath "${KVBENCH:-build/bin/kvbench}")
suite=$(realpath bench/suites/gate-trial.json)
dir=${1:?usage: bench/tools/planted_changes.sh DIR [--busy] [LABEL=BINARY[:POLICY_FIELDS]]...}
shift
busy=0
changes=()
for arg in "$@"; do
  case "$arg" in
    --busy) busy=1 ;;
    *=*) changes+=("$arg") ;;
    *) echo "planted_changes.sh: $arg: unknown argument" >&2; exit 2 ;;
  esac
done
if [ ${#changes[@]} -eq 0 ]; then
  changes=("repeat 0.05=$kvbench:\"test_repeat_attention\": 0.05" "repeat 0.25=$kvbench:\"test_repeat_attention\": 0.25"
           "test_slowdown 0.25=$kvbench:\"test_slowdown\": 0.25")
fi
mkdir -p "$dir" && cd "$dir" || exit 2
rm -f planted.sqlite runs.log
spinner=""
if [ $busy -eq 1 ]; then
  timeout 36000 sh -c 'while :; do :; done' &
  spinner=$!
  trap 'kill $spinner 2>/dev/null' EXIT
fi
run() {  # $1 binary, $2 suite file, then run flags; prints the run id
  local bin=$1 file=$2
  shift 2
  "$bin" run --suite "$file" --db planted.sqlite --json "$@" >/dev/null 2>>runs.log || { echo "planted_changes.sh: a run failed (runs.log)" >&2; exit 1; }
  sqlite3 planted.sqlite "SELECT max(id) FROM runs"
}
row() {  # $1 gate output, $2 metric: the row's verdict and change
  local line
  line=$(grep -E "^[a-z]+( \(judged by [^)]*\))? [^ ]+ $2: " "$1" | head -1)
  [ -n "$line" ] || line="unchanged (not listed)"
  printf '%s' "$line" | sed -E "s/^([a-z]+)( \(judged by [^)]*\))? [^ ]+ $2: (.*)$/\1\2: \3/"
}
base_host=$(run "$kvbench" "$suite")
base_sim=$(run "$kvbench" "$suite" --sim --repetitions 1)
echo "| change | host gate | span_decode_total_cpu_ms | sim gate | span_decode_total_sim_instructions |"
echo "|---|---|---|---|---|"
for change in "${changes[@]}"; do
  label=${change%%=*}
  rest=${change#*=}
  bin=${rest%%:*}
  fields=""
  [ "$rest" != "$bin" ] && fields=${rest#*:}
  file="$suite"
  if [ -n "$fields" ]; then
    file="$dir/$(echo "$label" | tr -c 'a-zA-Z0-9' '-').json"
    sed "s/\"sample_every\": 8}}/\"sample_every\": 8}, $fields}/" "$suite" >"$file"
  fi
  host=$(run "$bin" "$file")
  sim=$(run "$bin" "$file" --sim --repetitions 1)
  "$kvbench" gate --baseline "$base_host" --candidate "$host" --db planted.sqlite >"host-$host.txt" 2>&1; host_exit=$?
  "$kvbench" gate --baseline "$base_sim" --candidate "$sim" --db planted.sqlite >"sim-$sim.txt" 2>&1; sim_exit=$?
  echo "| $label | exit $host_exit | $(row "host-$host.txt" span_decode_total_cpu_ms) | exit $sim_exit | $(row "sim-$sim.txt" span_decode_total_sim_instructions) |"
done
