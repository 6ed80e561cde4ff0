#!/usr/bin/env bash
# The nightly flow: run the suite, and beside it the sim suite under the sim clock; gate each
# against its baseline, write the reports, and with --promote move the baselines to the new runs
# when the night passed.
#
#   ci/nightly.sh [--db PATH] [--baseline NAME] [--suite NAME|PATH] [--out DIR] [--promote] [--tag T]
#                 [--inconclusive pass|fail] [--unreliable pass|fail] [--noise-threshold X] [--shards DIR | --run-group ID]
#                 [--sim-suite NAME|PATH|none] [--sim-baseline NAME] [--fail-on-degraded]
#
# The sim suite (default the built-in gate-sim) runs with `kvbench run --sim`: its figures are
# the engine's work counted under callgrind, the same on a busy runner as on an idle one
# (docs/gate.md, the sim clock). It is gated against --sim-baseline (default <baseline>/sim), its
# gate's files written as gate-sim.xml, gate-sim.md and gate-sim.json. --sim-suite none leaves it
# out: the flow is then the host suite's alone.
#
# With --shards DIR the suite is not run here: the shard databases in DIR (*.sqlite, written by
# `kvbench run --shard I/N --run-group ID` on other machines) are merged into the database
# (`kvbench merge`), and the merged run is gated, reported and promoted like a run of its own.
# With --run-group ID and a PostgreSQL --db (postgresql://...) the shards wrote straight into that
# server (`kvbench run --shard I/N --run-group ID --db postgresql://...`): their runs are merged
# there, the merged run taking their place. Its suite, tags and noise threshold are the shards'
# own: --suite, --tag and --noise-threshold are refused with either.
#
# The first night (no baseline yet) passes and, with --promote, becomes the baseline. The gate's
# JUnit, Markdown and JSON land in DIR (default the repository's kvbench-results/) as gate.xml, gate.md and
# gate.json, and the run's HTML report beside them in DIR/report/index.html. --inconclusive and
# --unreliable go to `kvbench gate`, --noise-threshold to `kvbench run`.
#
# Host rows that noise (or too few repetitions) left undecided - unreliable, or inconclusive - do
# not fail or block the night when the sim suite settled their spans: its gate is a plain pass and
# it gated, unchanged, the sim rows that count each such row's span (gate.json's "sim_rows"). One
# line says so, with the advice.
#
# With the sim suite a night is promoted when it passed: its sim gate a plain pass, no host row
# regressed, and its undecided host rows settled by the sim suite or passed by --unreliable pass
# and --inconclusive pass (the default for inconclusive rows). Without it, only a plain pass is
# promoted. The sim baseline moves to the sim run; the host baseline moves to the host run unless most of its repetitions were noisy
# (a baseline whose wall times were all waits decides nothing later): that is said, and the host
# baseline stays. The same holds on a first night: it passes, its sim run becomes the sim baseline
# and its host run the host baseline when it was not mostly noisy. Any other night says why it is
# not promoted and leaves the baselines where they are.
#
# With --fail-on-degraded (given to `kvbench run`) a night whose runs completed but degraded in
# some case (L2 faults or a full L2, memory danger, requantization, overflow) is still gated and
# reported, exits 7 unless a gate regressed, and is not promoted.
#
# Exit codes are the gates': 1 when either regressed, else the sim gate's when it is not 0, else the
# host gate's (4 and 5 become 0 when the sim suite settled every undecided row): 0 pass, 2 bad input,
# 3 internal error, 4 inconclusive rows under --inconclusive fail, 5 unreliable rows under
# --unreliable fail, 6 needs a baseline (the benchmark definition changed: set one with
# `kvbench baseline set`).
set -uo pipefail
# Defaults live in the repository; paths given as arguments are taken as given.
root=$(cd "$(dirname "$0")/.." && pwd)
db=$root/kvbench-results/results.sqlite
baseline=nightly/main
suite=nightly
out=$root/kvbench-results
promote=0
tags=(nightly)
gate_args=()
run_args=()
shards=""
run_group=""
run_flags=""  # --suite, --tag or --noise-threshold as given (they do not go with --shards)
sim_suite=gate-sim
sim_baseline=
fail_on_degraded=0
unreliable_mode=fail  # the gate's defaults, as --unreliable and --inconclusive set them
inconclusive_mode=pass
# A flag's value, or exit 2 when it is missing.
require_value() {
  if [ $# -lt 2 ]; then
    echo "ci/nightly.sh: $1: needs a value" >&2
    exit 2
  fi
}
pass_or_fail() {
  case "$2" in
    pass|fail) ;;
    *) echo "ci/nightly.sh: $1: '$2' must be pass or fail" >&2; exit 2 ;;
  esac
}
while [ $# -gt 0 ]; do
  case "$1" in
    --db|--baseline|--suite|--out|--tag|--inconclusive|--unreliable|--noise-threshold|--shards|--run-group|--sim-suite|--sim-baseline) require_value "$@" ;;
  esac
  case "$1" in
    --db) db=$2; shift 2 ;;
    --baseline) baseline=$2; shift 2 ;;
    --suite) suite=$2; run_flags+=" --suite"; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --tag) tags+=("$2"); run_flags+=" --tag"; shift 2 ;;
    --promote) promote=1; shift ;;
    --fail-on-degraded) fail_on_degraded=1; shift ;;
    --inconclusive|--unreliable) pass_or_fail "$1" "$2"; gate_args+=("$1" "$2"); declare "${1#--}_mode=$2"; shift 2 ;;
    --noise-threshold) run_args+=("$1" "$2"); run_flags+=" --noise-threshold"; shift 2 ;;
    --shards) shards=$2; shift 2 ;;
    --run-group) run_group=$2; shift 2 ;;
    --sim-suite) sim_suite=$2; shift 2 ;;
    --sim-baseline) sim_baseline=$2; shift 2 ;;
    *) echo "ci/nightly.sh: $1: unknown argument (--db, --baseline, --suite, --out, --tag, --promote, --inconclusive, --unreliable, --noise-threshold, --shards, --run-group, --sim-suite, --sim-baseline, --fail-on-degraded)" >&2; exit 2 ;;
  esac
done
[ -n "$sim_baseline" ] || sim_baseline=$baseline/sim
if [ "$sim_baseline" = "$baseline" ]; then
  echo "ci/nightly.sh: --sim-baseline: '$sim_baseline' is the host suite's baseline too; the two suites need a baseline each" >&2
  exit 2
fi
server=0
case "$db" in postgresql://*|postgres://*) server=1 ;; esac
# What this script prints of --db: a URI without its password (kvbench redacts its own output).
shown_db=$(printf '%s' "$db" | sed -E 's#^(postgres(ql)?://[^:/@?]*):[^@/?]*@#\1@#; s#([?&])password=[^&]*&?#\1#; s#[?&]$##')
if [ -n "$shards" ] && [ -n "$run_group" ]; then
  echo "ci/nightly.sh: --shards and --run-group: the shards are either files in a directory or runs on the --db server" >&2
  exit 2
fi
if [ -n "$run_group" ] && [ "$server" = 0 ]; then
  echo "ci/nightly.sh: --run-group: merges shards written straight into a PostgreSQL --db (postgresql://...); shard files go with --shards DIR" >&2
  exit 2
fi
if { [ -n "$shards" ] || [ -n "$run_group" ]; } && [ -n "$run_flags" ]; then
  echo "ci/nightly.sh: ${shards:+--shards}${run_group:+--run-group}:$run_flags belong to the shards' own runs (kvbench run --shard)" >&2
  exit 2
fi
kvbench=${KVBENCH:-$root/build/bin/kvbench}
if [ ! -x "$kvbench" ]; then
  echo "ci/nightly.sh: $kvbench: not built (run ci/quickstart.sh or cmake --build build --target kvbench)" >&2
  exit 2
fi
mkdir -p "$out"
[ "$server" = 1 ] || mkdir -p "$(dirname "$db")"
say() { printf 'nightly: %s\n' "$*" >&2; }

degraded_flag=""
[ $fail_on_degraded -eq 0 ] || degraded_flag=--fail-on-degraded
degraded_runs=()
tag_args=()
for t in "${tags[@]}"; do tag_args+=(--tag "$t"); done
if [ -n "$shards" ]; then
  shard_files=("$shards"/*.sqlite)
  if [ ! -e "${shard_files[0]}" ]; then
    echo "ci/nightly.sh: --shards: $shards holds no shard database (*.sqlite)" >&2
    exit 2
  fi
  say "merging ${#shard_files[@]} shard databases from $shards into $shown_db"
  run_json=$("$kvbench" merge --into "$db" "${shard_files[@]}" --json)
elif [ -n "$run_group" ]; then
  say "merging the shard runs of run group $run_group on the server"
  run_json=$("$kvbench" merge --into "$db" "$db" --run-group "$run_group" --json)
else
  say "running suite $suite into $shown_db"
  run_json=$("$kvbench" run --suite "$suite" --db "$db" "${tag_args[@]}" "${run_args[@]}" --json $degraded_flag)
fi
status=$?
echo "$run_json"
# 7: the run completed but degraded (--fail-on-degraded): gated and reported all the same.
if [ $status -eq 7 ] && [ $fail_on_degraded -eq 1 ]; then
  degraded_runs+=("host run")
  status=0
fi
if [ $status -ne 0 ]; then
  say "the run did not complete (exit $status): no gate"
  exit "$status"
fi
if ! run_id=$(printf '%s' "$run_json" | python3 -c 'import json, sys; print(int(json.load(sys.stdin)["run_id"]))'); then
  say "cannot read the run id from kvbench run --json (above)"
  exit 3
fi
# "noisy of": how many of the host run's repetitions noise flagged (empty when not said).
host_noise=$(printf '%s' "$run_json" | python3 -c 'import json, sys
n = json.load(sys.stdin).get("noisy_repetitions")
print("%d %d" % (n["noisy"], n["of"]) if isinstance(n, dict) else "")' 2>/dev/null)
mostly_noisy() { [ -n "$host_noise" ] && set -- $host_noise && [ "$2" -gt 0 ] && [ $((2 * $1)) -gt "$2" ]; }

# The sim suite, counted under callgrind, into the same database.
sim_run_id=""
if [ "$sim_suite" != none ]; then
  say "running sim suite $sim_suite (kvbench run --sim) into $shown_db"
  sim_json=$("$kvbench" run --suite "$sim_suite" --sim --db "$db" --tag nightly-sim --json $degraded_flag)
  sim_status=$?
  echo "$sim_json"
  if [ $sim_status -eq 7 ] && [ $fail_on_degraded -eq 1 ]; then
    degraded_runs+=("sim run")
    sim_status=0
  fi
  if [ $sim_status -ne 0 ]; then
    say "the sim run did not complete (exit $sim_status): no gate"
    exit "$sim_status"
  fi
  if ! sim_run_id=$(printf '%s' "$sim_json" | python3 -c 'import json, sys; print(int(json.load(sys.stdin)["run_id"]))'); then
    say "cannot read the run id from kvbench run --sim --json (above)"
    exit 3
  fi
fi

# Why a gated night is not a plain pass, from the gate's JSON (argument: its path); exits 0 and
# prints nothing when it is one. With a second argument (the sim gate's JSON), unreliable rows
# whose spans that gate settled are not reasons.
not_plain_pass() {
  python3 - "$@" <<'PY'
import json, sys
def load(path):
    try:
        with open(path) as f:
            gate = json.load(f)
    except (OSError, ValueError) as e:
        print(f"{path.rsplit('/', 1)[-1]} cannot be read ({e})")
        sys.exit(1)
    if not isinstance(gate, dict):
        print(f"{path.rsplit('/', 1)[-1]} is not an object")
        sys.exit(1)
    return gate
gate = load(sys.argv[1])
def count(key):
    n = gate.get(key)
    return n if isinstance(n, int) and not isinstance(n, bool) else 0
def rows(n, what):
    return f"{n} row{'' if n == 1 else 's'} {what}"
unreliable = count("unreliable") + count("unreliable_judged_by_cpu")
inconclusive = count("inconclusive")
settled = settled_inconclusive = 0
if len(sys.argv) > 2 and unreliable + inconclusive:
    sim = load(sys.argv[2])
    passed = set()
    if sim.get("plain_pass") is True:
        passed = {r.get("metric") for r in sim.get("rows", []) if r.get("verdict") in ("unchanged", "improved")}
    for r in gate.get("rows", []):
        if r.get("sim_rows") and all(m in passed for m in r["sim_rows"]):
            settled += r.get("verdict") == "unreliable"
            settled_inconclusive += r.get("verdict") == "inconclusive"
reasons = []
if count("failing"):
    reasons.append(rows(count("failing"), "regressed"))
if inconclusive > settled_inconclusive:
    reasons.append(rows(inconclusive - settled_inconclusive, "inconclusive"))
if unreliable > settled:
    left = unreliable - settled
    judged = count("unreliable_judged_by_cpu")
    if settled or not judged:
        reasons.append(rows(left, "unreliable"))
    else:
        if count("unreliable"):
            reasons.append(rows(count("unreliable"), "unreliable"))
        reasons.append(rows(judged, "judged by CPU time only (noise left their wall time undecided)"))
changed = gate.get("definition_changed")
if isinstance(changed, dict):
    reasons.append(f"needs a baseline (benchmark definition changed v{changed.get('from')} -> v{changed.get('to')})")
if (gate.get("plain_pass") is True or settled + settled_inconclusive > 0) and not reasons:
    sys.exit(0)
if not reasons:
    reasons.append("not a plain pass" if "plain_pass" in gate else "gate.json does not say plain_pass")
print(", ".join(reasons))
sys.exit(1)
PY
}

# The host gate's exit code once the sim gate settled what it could (arguments: gate.json,
# gate-sim.json): an undecided row - unreliable, or inconclusive - whose spans the sim gate
# counted and passed fails nothing. Prints "CODE SETTLED UNDECIDED".
settled_verdict() {
  python3 - "$1" "$2" "$unreliable_mode" "$inconclusive_mode" <<'PY'
import json, sys
try:
    gate, sim = (json.load(open(p)) for p in sys.argv[1:3])
except (OSError, ValueError):
    sys.exit(1)
unreliable_fails, inconclusive_fails = sys.argv[3] == "fail", sys.argv[4] == "fail"
passed = {r.get("metric") for r in sim.get("rows", []) if r.get("verdict") in ("unchanged", "improved")} if sim.get("plain_pass") is True else set()
rows = gate.get("rows", [])
def settled(r):
    return bool(r.get("sim_rows")) and all(m in passed for m in r["sim_rows"])
undecided = [r for r in rows if r.get("verdict") in ("unreliable", "inconclusive")]
left_unreliable = [r for r in rows if r.get("verdict") == "unreliable" and not r.get("judged_by") and not settled(r)]
left_inconclusive = [r for r in rows if r.get("verdict") == "inconclusive" and not settled(r)]
code = 0
if gate.get("failing", 0):
    code = 1
elif isinstance(gate.get("definition_changed"), dict):
    code = 6
elif left_unreliable and unreliable_fails:
    code = 5
elif left_inconclusive and inconclusive_fails:
    code = 4
print(code, sum(settled(r) for r in undecided), len(undecided))
PY
}

# The page people read: after the gate, so its verdict is on it. A report that cannot be written
# is said, and does not change the gate's exit code.
report() {
  if "$kvbench" report --db "$db" --run "$run_id" --out "$out/report" >&2; then
    say "report: $out/report/index.html"
  else
    say "the report could not be written (above)"
  fi
}

# Whether baseline $1 exists: 0 yes, 1 no; any other failure to read exits the script.
has_baseline() {
  local lookup status=0
  lookup=$("$kvbench" baseline show "$1" --db "$db" 2>&1 >/dev/null) || status=$?
  [ $status -eq 0 ] && return 0
  [[ "$lookup" == *"no baseline named"* ]] && return 1
  # A database that cannot be read is not a first night: nothing is promoted without a gate.
  say "cannot look up baseline '$1': $lookup"
  exit "$status"
}

# Gates run $2 against baseline $1, its files as $3.{xml,md,json}; sets `gate` to its exit code.
gate_run() {
  say "gating run $2 against baseline $1"
  # Last night's files must not pass for tonight's when the gate writes none.
  rm -f "$3.xml" "$3.md" "$3.json"
  "$kvbench" gate --baseline "$1" --candidate "$2" --db "$db" "${gate_args[@]}" --junit "$3.xml" --markdown "$3.md" --json "$3.json"
  gate=$?
}

# --- the host suite's gate ----------------------------------------------------------------------
host_first=0
host_gate=0
if has_baseline "$baseline"; then
  gate_run "$baseline" "$run_id" "$out/gate"
  host_gate=$gate
else
  host_first=1
  say "no baseline '$baseline' yet: this first night passes"
  rm -f "$out/gate.xml" "$out/gate.md" "$out/gate.json"
fi
# --- the sim suite's gate -----------------------------------------------------------------------
sim_first=0
sim_gate=0
if [ -n "$sim_run_id" ]; then
  if has_baseline "$sim_baseline"; then
    gate_run "$sim_baseline" "$sim_run_id" "$out/gate-sim"
    sim_gate=$gate
  else
    sim_first=1
    say "no sim baseline '$sim_baseline' yet: the sim suite's first night passes"
    rm -f "$out/gate-sim.xml" "$out/gate-sim.md" "$out/gate-sim.json"
  fi
fi
report
[ $host_gate -eq 6 ] && say "needs a baseline: the benchmark definition changed; \`kvbench baseline set $baseline RUN\` (e.g. run $run_id) once the new figures are trusted"
[ $sim_gate -eq 6 ] && say "needs a sim baseline: the benchmark definition changed; \`kvbench baseline set $sim_baseline RUN\` (e.g. run $sim_run_id) once the new counts are trusted"

# Host rows noise left undecided, settled by the sim gate's counted work.
host_code=$host_gate
if [ $host_first -eq 0 ] && [ -n "$sim_run_id" ] && [ $sim_first -eq 0 ] && [ $sim_gate -eq 0 ] && [ -f "$out/gate.json" ] &&
   { [ $host_gate -eq 0 ] || [ $host_gate -eq 4 ] || [ $host_gate -eq 5 ]; }; then
  if verdict=$(settled_verdict "$out/gate.json" "$out/gate-sim.json"); then
    set -- $verdict
    host_code=$1
    if [ "$3" -gt 0 ] && [ "$2" -eq "$3" ]; then
      say "$3 host row(s) left undecided (unreliable or inconclusive: noise or too few repetitions); the sim suite's counted work settled their spans (gate-sim.json): wall time is not gated tonight; run the host suite on a quiet runner to gate it"
    elif [ "$3" -gt 0 ]; then
      say "$3 host row(s) left undecided; the sim suite settled $2 of them (the others count no span's work it counts: memory, noise, device)"
    fi
  fi
fi

# --- the night's exit code ----------------------------------------------------------------------
if [ $host_gate -eq 1 ] || [ $sim_gate -eq 1 ]; then
  code=1
elif [ $sim_gate -ne 0 ]; then
  code=$sim_gate
else
  code=$host_code
fi
if [ ${#degraded_runs[@]} -gt 0 ]; then
  [ $code -eq 1 ] || code=7
  say "the ${degraded_runs[*]} ran degraded in some case (kvbench show says what each gave up): exit $code (--fail-on-degraded)$([ $promote -eq 1 ] && echo ', not promoted')"
fi

# --- promotion ----------------------------------------------------------------------------------
# With the sim suite a night that passed is promoted (its sim gate a plain pass, no host row
# regressed, undecided host rows settled or passed); without it, only a plain pass.
if [ $promote -eq 1 ]; then
  promotable=1
  [ ${#degraded_runs[@]} -eq 0 ] || promotable=0
  if [ -n "$sim_run_id" ] && [ $sim_first -eq 0 ]; then
    if ! why=$(not_plain_pass "$out/gate-sim.json") || [ $sim_gate -ne 0 ]; then
      promotable=0
      say "not promoted: the sim suite: ${why:-its gate exited $sim_gate}"
    fi
  fi
  if [ $host_first -eq 0 ]; then
    if [ ! -f "$out/gate.json" ]; then
      promotable=0
      say "not promoted: the gate exited $host_gate and wrote no gate.json"
    elif [ -n "$sim_run_id" ]; then
      if [ $code -ne 0 ]; then
        promotable=0
        why=$(not_plain_pass "$out/gate.json" "$out/gate-sim.json")
        [ $host_gate -eq 0 ] && [ $host_code -eq 0 ] || say "not promoted: ${why:-the gate exited $host_code}"
      fi
    elif ! why=$(not_plain_pass "$out/gate.json") || [ $host_gate -ne 0 ]; then
      promotable=0
      say "not promoted: ${why:-the gate exited $host_gate}"
    fi
  fi
  if [ $promotable -eq 1 ]; then
    if [ -n "$sim_run_id" ]; then
      "$kvbench" baseline set "$sim_baseline" "$sim_run_id" --reason "$([ $sim_first -eq 1 ] && echo "first night" || echo "promoted after a pass")" --db "$db" || exit $?
      say "sim baseline $sim_baseline moved to run $sim_run_id"
    fi
    if mostly_noisy; then
      set -- $host_noise
      say "host baseline $baseline not moved: $1 of $2 host repetitions were noisy (the engine's threads waited for a core or the cores slowed), and a baseline of waits decides no wall time later; run the host suite on a quiet runner and \`kvbench baseline set $baseline RUN\`"
    else
      "$kvbench" baseline set "$baseline" "$run_id" --reason "$([ $host_first -eq 1 ] && echo "first night" || echo "promoted after a pass")" --db "$db" || exit $?
      say "baseline $baseline moved to run $run_id"
    fi
  fi
fi
exit $code
