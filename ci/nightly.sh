#!/usr/bin/env bash
# The nightly flow: run the suite, gate it against the baseline, write the reports, and with
# --promote move the baseline to the new run when the night is a plain pass.
#
#   ci/nightly.sh [--db PATH] [--baseline NAME] [--suite NAME|PATH] [--out DIR] [--promote] [--tag T]
#                 [--inconclusive pass|fail] [--unreliable pass|fail] [--noise-threshold X] [--shards DIR | --run-group ID]
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
# A night is promoted only when it is a plain pass: the gate exits 0 and gate.json says
# "plain_pass": true (nothing regressed, inconclusive or unreliable, and the benchmark definition
# did not change). Any other night says why it is not promoted and leaves the baseline where it is.
#
# Exit codes are the gate's: 0 pass, 1 a regression, 2 bad input, 3 internal error,
# 4 inconclusive rows under --inconclusive fail, 5 unreliable rows under --unreliable fail,
# 6 needs a baseline (the benchmark definition changed: set one with `kvbench baseline set`).
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
    --db|--baseline|--suite|--out|--tag|--inconclusive|--unreliable|--noise-threshold|--shards|--run-group) require_value "$@" ;;
  esac
  case "$1" in
    --db) db=$2; shift 2 ;;
    --baseline) baseline=$2; shift 2 ;;
    --suite) suite=$2; run_flags+=" --suite"; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --tag) tags+=("$2"); run_flags+=" --tag"; shift 2 ;;
    --promote) promote=1; shift ;;
    --inconclusive|--unreliable) pass_or_fail "$1" "$2"; gate_args+=("$1" "$2"); shift 2 ;;
    --noise-threshold) run_args+=("$1" "$2"); run_flags+=" --noise-threshold"; shift 2 ;;
    --shards) shards=$2; shift 2 ;;
    --run-group) run_group=$2; shift 2 ;;
    *) echo "ci/nightly.sh: $1: unknown argument (--db, --baseline, --suite, --out, --tag, --promote, --inconclusive, --unreliable, --noise-threshold, --shards, --run-group)" >&2; exit 2 ;;
  esac
done
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
  run_json=$("$kvbench" run --suite "$suite" --db "$db" "${tag_args[@]}" "${run_args[@]}" --json)
fi
status=$?
echo "$run_json"
if [ $status -ne 0 ]; then
  say "the run did not complete (exit $status): no gate"
  exit "$status"
fi
if ! run_id=$(printf '%s' "$run_json" | python3 -c 'import json, sys; print(int(json.load(sys.stdin)["run_id"]))'); then
  say "cannot read the run id from kvbench run --json (above)"
  exit 3
fi

# Why a gated night is not a plain pass, from the gate's JSON (argument: its path); exits 0 and
# prints nothing when it is one.
not_plain_pass() {
  python3 - "$1" <<'PY'
import json, sys
try:
    with open(sys.argv[1]) as f:
        gate = json.load(f)
except (OSError, ValueError) as e:
    print(f"gate.json cannot be read ({e})")
    sys.exit(1)
if not isinstance(gate, dict):
    print("gate.json is not an object")
    sys.exit(1)
def count(key):
    n = gate.get(key)
    return n if isinstance(n, int) and not isinstance(n, bool) else 0
def rows(n, what):
    return f"{n} row{'' if n == 1 else 's'} {what}"
reasons = []
if count("failing"):
    reasons.append(rows(count("failing"), "regressed"))
if count("inconclusive"):
    reasons.append(rows(count("inconclusive"), "inconclusive"))
if count("unreliable"):
    reasons.append(rows(count("unreliable"), "unreliable"))
if count("unreliable_judged_by_cpu"):
    reasons.append(rows(count("unreliable_judged_by_cpu"), "judged by CPU time only (noise left their wall time undecided)"))
changed = gate.get("definition_changed")
if isinstance(changed, dict):
    reasons.append(f"needs a baseline (benchmark definition changed v{changed.get('from')} -> v{changed.get('to')})")
if gate.get("plain_pass") is True and not reasons:
    sys.exit(0)
if not reasons:
    reasons.append("not a plain pass" if "plain_pass" in gate else "gate.json does not say plain_pass")
print(", ".join(reasons))
sys.exit(1)
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

lookup_status=0
lookup=$("$kvbench" baseline show "$baseline" --db "$db" 2>&1 >/dev/null) || lookup_status=$?
if [ $lookup_status -ne 0 ] && [[ "$lookup" != *"no baseline named"* ]]; then
  # A database that cannot be read is not a first night: nothing is promoted without a gate.
  say "cannot look up baseline '$baseline': $lookup"
  exit "$lookup_status"
fi
if [ $lookup_status -ne 0 ]; then
  say "no baseline '$baseline' yet: this first night passes"
  if [ $promote -eq 1 ]; then
    "$kvbench" baseline set "$baseline" "$run_id" --reason "first night" --db "$db" || exit $?
  fi
  report
  exit 0
fi

say "gating run $run_id against baseline $baseline"
# Last night's files must not pass for tonight's when the gate writes none.
rm -f "$out/gate.xml" "$out/gate.md" "$out/gate.json"
"$kvbench" gate --baseline "$baseline" --candidate "$run_id" --db "$db" "${gate_args[@]}" \
  --junit "$out/gate.xml" --markdown "$out/gate.md" --json "$out/gate.json"
gate=$?
report
if [ $gate -eq 6 ]; then
  say "needs a baseline: the benchmark definition changed; \`kvbench baseline set $baseline RUN\` (e.g. run $run_id) once the new figures are trusted"
fi
if [ $promote -eq 1 ]; then
  why=$(not_plain_pass "$out/gate.json")
  plain=$?
  if [ $gate -eq 0 ] && [ $plain -eq 0 ]; then
    "$kvbench" baseline set "$baseline" "$run_id" --reason "promoted after a plain pass" --db "$db" || exit $?
    say "baseline $baseline moved to run $run_id"
  elif [ ! -f "$out/gate.json" ]; then
    say "not promoted: the gate exited $gate and wrote no gate.json"
  else
    say "not promoted: ${why:-the gate exited $gate}"
  fi
fi
exit $gate
