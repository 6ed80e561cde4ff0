#!/usr/bin/env bash
# The nightly flow: run the suite, gate it against the baseline, write the reports, and with
# --promote move the baseline to the new run when the gate passes.
#
#   ci/nightly.sh [--db PATH] [--baseline NAME] [--suite NAME|PATH] [--out DIR] [--promote] [--tag T]
#
# The first night (no baseline yet) passes and, with --promote, becomes the baseline. The gate's
# JUnit, Markdown and JSON land in DIR (default the repository's kvbench-results/) as gate.xml, gate.md and
# gate.json, and the run's HTML report beside them in DIR/report/index.html. Exit codes are the gate's: 0 pass, 1 a regression, 2 bad input, 3 internal error.
set -uo pipefail
# Defaults live in the repository; paths given as arguments are taken as given.
root=$(cd "$(dirname "$0")/.." && pwd)
db=$root/kvbench-results/results.sqlite
baseline=nightly/main
suite=nightly
out=$root/kvbench-results
promote=0
tags=(nightly)
while [ $# -gt 0 ]; do
  case "$1" in
    --db) db=$2; shift 2 ;;
    --baseline) baseline=$2; shift 2 ;;
    --suite) suite=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --tag) tags+=("$2"); shift 2 ;;
    --promote) promote=1; shift ;;
    *) echo "ci/nightly.sh: $1: unknown argument (--db, --baseline, --suite, --out, --tag, --promote)" >&2; exit 2 ;;
  esac
done
kvbench=${KVBENCH:-$root/build/bin/kvbench}
if [ ! -x "$kvbench" ]; then
  echo "ci/nightly.sh: $kvbench: not built (run ci/quickstart.sh or cmake --build build --target kvbench)" >&2
  exit 2
fi
mkdir -p "$out" "$(dirname "$db")"
say() { printf 'nightly: %s\n' "$*" >&2; }

tag_args=()
for t in "${tags[@]}"; do tag_args+=(--tag "$t"); done
say "running suite $suite into $db"
run_json=$("$kvbench" run --suite "$suite" --db "$db" "${tag_args[@]}" --json)
status=$?
echo "$run_json"
if [ $status -ne 0 ]; then
  say "the run did not complete (exit $status): no gate"
  exit "$status"
fi
run_id=$(printf '%s' "$run_json" | sed -n 's/.*"run_id":\([0-9]*\).*/\1/p')

# The page people read: after the gate, so its verdict is on it. A report that cannot be written
# is said, and does not change the gate's exit code.
report() {
  if "$kvbench" report --db "$db" --run "$run_id" --out "$out/report" >&2; then
    say "report: $out/report/index.html"
  else
    say "the report could not be written (above)"
  fi
}

if ! "$kvbench" baseline show "$baseline" --db "$db" >/dev/null 2>&1; then
  say "no baseline '$baseline' yet: this first night passes"
  if [ $promote -eq 1 ]; then
    "$kvbench" baseline set "$baseline" "$run_id" --reason "first night" --db "$db" || exit $?
  fi
  report
  exit 0
fi

say "gating run $run_id against baseline $baseline"
"$kvbench" gate --baseline "$baseline" --candidate "$run_id" --db "$db" \
  --junit "$out/gate.xml" --markdown "$out/gate.md" --json "$out/gate.json"
gate=$?
report
if [ $gate -eq 0 ] && [ $promote -eq 1 ]; then
  "$kvbench" baseline set "$baseline" "$run_id" --reason "promoted after a passing gate" --db "$db" || exit $?
  say "baseline $baseline moved to run $run_id"
fi
exit $gate
