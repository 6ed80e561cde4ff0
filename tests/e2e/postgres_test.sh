#!/usr/bin/env bash
# kvbench with a PostgreSQL results store (`--db postgresql://...`), against a real PostgreSQL
# server started here: every command on the server, four writers at once, a writer killed on
# "another host" read aborted after its heartbeat timeout, gate and report equal to SQLite's for
# the same runs, a password that never leaves the command line (not in any output, stored row or
# server log), bad URIs and a wrong password refused with exit 2, a server that goes away
# mid-run, and a server whose schema is newer than the binary.
#
# The server: Debian's PostgreSQL 15 binaries, a cluster initialised in a temporary directory by
# the unprivileged `postgres` user, reachable only by its Unix socket there; `postgres` logs in
# by trust (the test's own psql), the role `kvb` (what kvbench connects as) by password
# (scram-sha-256), given in the URI or by a pgpass file. One database per part keeps the parts
# independent. Needs root (runuser); where the server binaries or the `postgres` user are
# missing the test is skipped (exit 77, CTest's SKIP_RETURN_CODE) and says why.
#
# Every kvbench call's stdout and stderr is kept under the work directory (out/), for the
# credential scan at the end.
set -euo pipefail

kvbench=${1:?usage: tests/e2e/postgres_test.sh KVBENCH}
[ -x "$kvbench" ] || { echo "postgres_test: $kvbench: not an executable" >&2; exit 2; }
kvbench=$(realpath "$kvbench")
repo=$(cd "$(dirname "$0")/../.." && pwd)

# --- the server's binaries, or a skip ----------------------------------------------------------
pg_bin=$(pg_config --bindir 2>/dev/null || true)
if [ -z "$pg_bin" ] || [ ! -x "$pg_bin/initdb" ]; then
  pg_bin=$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
fi
for tool in initdb pg_ctl postgres psql createdb pg_dump; do
  if [ -z "$pg_bin" ] || [ ! -x "$pg_bin/$tool" ]; then
    echo "SKIPPED: no PostgreSQL server binaries (no $tool in \$(pg_config --bindir) or /usr/lib/postgresql/*/bin; ci/install-deps.sh installs Debian's postgresql)"
    exit 77
  fi
done
if [ "$(id -u)" != 0 ] || ! id -u postgres >/dev/null 2>&1 || ! command -v runuser >/dev/null; then
  echo "SKIPPED: the server runs as the postgres user: needs root, runuser and a postgres user (Debian's postgresql package makes it)"
  exit 77
fi

# Only what this script passes reaches libpq.
unset PGHOST PGHOSTADDR PGPORT PGUSER PGDATABASE PGPASSWORD PGPASSFILE PGSERVICE PGSERVICEFILE PGOPTIONS
readonly password=sekret-pw-46
work=$(mktemp -d)
chmod 0755 "$work"  # the postgres user enters it to reach its own directory
pg=$work/pg         # the cluster (data/), its log and its socket: owned by postgres
out=$work/out       # every kvbench output, scanned for the password at the end
cwd=$work/cwd       # kvbench's working directory: what it leaves beside itself is scanned too
mkdir -p "$pg" "$out" "$cwd" "$work/files"
chown postgres: "$pg"

# In its own directory: the caller's may be closed to it.
as_postgres() { (cd "$pg" && runuser -u postgres -- "$@"); }
cleanup() {
  local status=$?
  # A background kvbench still running after a failure: only the ones this script started.
  for pid in ${background_pids:-}; do kill -9 "$pid" 2>/dev/null || true; done
  if [ -e "$pg/data/postmaster.pid" ]; then as_postgres "$pg_bin/pg_ctl" -D "$pg/data" -m immediate stop >/dev/null 2>&1 || true; fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT

fail() {  # $1: what failed; $2...: files whose tails explain it
  echo "FAILED: $1" >&2
  shift
  for file in "$@"; do
    [ -e "$file" ] || continue
    echo "--- ${file#"$work"/} (last 30 lines) ---" >&2
    tail -n 30 "$file" >&2
  done
  exit 1
}

start_server() { as_postgres "$pg_bin/pg_ctl" -D "$pg/data" -l "$pg/server.log" -w -t 60 start >/dev/null || fail "the server did not start" "$pg/server.log"; }
stop_server() { as_postgres "$pg_bin/pg_ctl" -D "$pg/data" -m "$1" -w stop >/dev/null || fail "the server did not stop" "$pg/server.log"; }
# psql as the superuser, on the socket: one row per line, fields separated by |.
q() { "$pg_bin/psql" -h "$pg" -U postgres -d "$1" -X -A -t -q -v ON_ERROR_STOP=1 -c "$2"; }

as_postgres "$pg_bin/initdb" -D "$pg/data" -U postgres --auth-local=trust --auth-host=reject -E UTF8 --locale=C --no-sync \
  >"$pg/initdb.log" 2>&1 || fail "initdb failed" "$pg/initdb.log"
cat >"$pg/data/pg_hba.conf" <<'HBA'
local all postgres trust
local all kvb scram-sha-256
HBA
# Durability is not under test: the server need not survive a crash of this machine.
cat >>"$pg/data/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$pg'
fsync = off
full_page_writes = off
synchronous_commit = off
CONF
start_server
q postgres "CREATE ROLE kvb LOGIN PASSWORD '$password'"
for db in kvb_a kvb_b kvb_c kvb_d kvb_g kvb_i; do
  "$pg_bin/createdb" -h "$pg" -U postgres -O kvb "$db"
done

uri() { echo "postgresql://kvb:$password@/$1?host=$pg"; }   # the password in the URI
redacted() { echo "postgresql://kvb@/$1?host=$pg"; }        # what kvbench may print of it
pgpass=$work/pgpass                                         # outside out/: it holds the password
echo "$pg:5432:*:kvb:$password" >"$pgpass"
chmod 0600 "$pgpass"
[ "$(PGPASSFILE=$pgpass "$pg_bin/psql" "$(redacted kvb_b)" -X -A -t -c "SELECT current_user")" = kvb ] ||
  fail "the role kvb cannot log in with the pgpass file"

# kvb NAME ARGS...: kvbench in $cwd, stdout to out/NAME.out, stderr to out/NAME.err; its exit
# code in $rc. ok NAME ARGS...: the same, and it must exit 0.
kvb() {
  local name=$1
  shift
  rc=0
  (cd "$cwd" && exec "$kvbench" "$@") >"$out/$name.out" 2>"$out/$name.err" || rc=$?
}
ok() {
  kvb "$@"
  [ "$rc" = 0 ] || fail "kvbench $2 ($1) exited $rc, expected 0" "$out/$1.err" "$out/$1.out"
}
# The value of one key of a JSON object file.
json_field() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
# `kvbench list runs --json` on $1, appended to out/$2.out (and .err); printed.
list_json() {
  local listed
  listed=$(cd "$cwd" && "$kvbench" list runs --json --db "$1" 2>>"$out/$2.err") || fail "kvbench list runs exited $? ($2)" "$out/$2.err"
  printf '%s\n' "$listed" | tee -a "$out/$2.out"
}
listed_status() {  # $1: db, $2: run id, $3: output name; the run's status as list reports it (none: not listed)
  list_json "$1" "$3" | python3 -c 'import json, sys; print(next((r["status"] for r in json.load(sys.stdin) if r["id"] == int(sys.argv[1])), "none"))' "$2"
}
count_listed() {  # $1: db, $2: status; how many runs list shows with it
  list_json "$1" count-listed | python3 -c 'import json, sys; print(sum(r["status"] == sys.argv[1] for r in json.load(sys.stdin)))' "$2"
}
# Poll until `list` reports run $2 of $1 as $3, for at most $4 seconds; fail naming $5.
wait_for_status() {
  local deadline=$((SECONDS + $4)) status
  while :; do
    status=$(listed_status "$1" "$2" poll-list)
    [ "$status" = "$3" ] && return 0
    [ "$SECONDS" -ge "$deadline" ] && fail "$5: run $2 reads '$status' after $4 s, expected '$3'" "$out/poll-list.err" "$out/poll-list.out"
    sleep 0.2
  done
}
# Wait for every process of $background_pids, started in order as 1, 2, ...: each must exit 0
# (else fail naming "$2 N" with its out/$1-N.err).
wait_all() {
  local n=0 pid
  for pid in $background_pids; do
    n=$((n + 1))
    rc=0
    wait "$pid" || rc=$?
    [ "$rc" = 0 ] || fail "$2 $n exited $rc" "$out/$1-$n.err"
  done
  background_pids=
}
# Wait at most $2 seconds for background process $1; its exit code in $rc.
wait_exit() {
  local deadline=$((SECONDS + $2))
  while kill -0 "$1" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
  kill -0 "$1" 2>/dev/null && return 1
  rc=0
  wait "$1" 2>/dev/null || rc=$?
}

# Small and fast: one smoke case, deterministic rows only in the comparisons (timings are not
# under test here).
tiny=(--suite smoke --filter multimodal-1i/q4 --repetitions 1)
rules=$work/files/exact-only.json
cat >"$rules" <<'JSON'
{"rules": [
  {"metric": "*_ms", "gated": false}, {"metric": "*_ms_*", "gated": false}, {"metric": "*_tps", "gated": false},
  {"metric": "*_instructions", "gated": false}, {"metric": "goodput", "gated": false},
  {"metric": "swap_*_gb_per_s", "gated": false}, {"metric": "peak_rss_bytes", "gated": false}]}
JSON
gate_ok() {  # a verdict is a result here: pass (0), regressed (1) or unreliable (5)
  case $rc in 0 | 1 | 5) ;; *) fail "kvbench $1 exited $rc (expected 0, 1 or 5)" "$out/$1.err" "$out/$1.out" ;; esac
}
echo "postgres_test: PostgreSQL $("$pg_bin/postgres" --version | awk '{print $3}') on $pg (setup took $SECONDS s)"

# --- a. every command on the server --------------------------------------------------------------
A=$(uri kvb_a)
ok a-run-1 run --suite smoke --filter multimodal-1i/q4 --repetitions 2 --tag pg-1 --json --db "$A"
ok a-run-2 run --suite smoke --filter multimodal-1i/q4 --repetitions 2 --tag pg-2 --json --db "$A"
run1=$(json_field "$out/a-run-1.out" run_id)
run2=$(json_field "$out/a-run-2.out" run_id)
[ "$(json_field "$out/a-run-2.out" status)" = complete ] || fail "run 2 is not complete" "$out/a-run-2.out"
[ "$(json_field "$out/a-run-2.out" db)" = "$(redacted kvb_a)" ] || fail "run --json's db is not the URI without its password" "$out/a-run-2.out"
echo "ok - run twice into PostgreSQL (runs $run1 and $run2)"
ok a-list list runs --db "$A"
grep -Eq "^ +$run2 +complete " "$out/a-list.out" || fail "list does not show run $run2 complete" "$out/a-list.out"
ok a-list-json list runs --json --tag pg-1 --db "$A"
[ "$(python3 -c 'import json, sys; print([r["id"] for r in json.load(open(sys.argv[1]))])' "$out/a-list-json.out")" = "[$run1]" ] ||
  fail "list --tag pg-1 does not list run $run1 alone" "$out/a-list-json.out"
ok a-show show latest:pg-2 --db "$A"
ok a-show-json show "$run1" --json --db "$A"
ok a-export-csv export latest:pg-1 --format csv --out "$out/a-export.csv" --db "$A"
ok a-export-json export "$run2" --format json --db "$A"
[ "$(wc -l <"$out/a-export.csv")" -gt 20 ] || fail "export wrote fewer than 20 CSV lines" "$out/a-export.csv"
echo "ok - list, show, export"
ok a-baseline-set baseline set pg-base "$run1" --reason "first pg run" --db "$A"
ok a-baseline-set-tmp baseline set pg-tmp "$run2" --db "$A"
ok a-baseline-list baseline list --db "$A"
grep -q "^pg-base " "$out/a-baseline-list.out" || fail "baseline list does not list pg-base" "$out/a-baseline-list.out"
ok a-baseline-show baseline show pg-base --db "$A"
ok a-baseline-rm baseline rm pg-tmp --db "$A"
ok a-list-baselines list baselines --db "$A"
grep -q "pg-tmp" "$out/a-list-baselines.out" && fail "baseline rm left pg-tmp" "$out/a-list-baselines.out"
echo "ok - baseline set, list, show, rm"
ok a-compare compare --baseline pg-base --candidate latest:pg-2 --format json --rules "$rules" --db "$A"
kvb a-gate gate --baseline pg-base --candidate latest:pg-2 --rules "$rules" --json "$out/a-gate.json" --junit "$out/a-gate.xml" --db "$A"
gate_ok a-gate
[ "$(q kvb_a "SELECT count(*) FROM verdicts")" = 1 ] || fail "the gate stored no verdict"
echo "ok - compare, gate (exit $rc, its verdict stored)"
ok a-ack ack --run "$run2" --baseline pg-base --metric 'attn_*' --reason "pg test" --db "$A"
ok a-ack-list ack list --db "$A"
ok a-list-acks list acks --json --db "$A"
ack_id=$(python3 -c 'import json, sys; a = json.load(open(sys.argv[1])); assert len(a) == 1, a; print(a[0]["id"])' "$out/a-list-acks.out")
ok a-ack-rm ack rm "$ack_id" --db "$A"
[ "$(q kvb_a "SELECT count(*) FROM acks")" = 0 ] || fail "ack rm left the acknowledgement"
ok a-ack-again ack --run "$run2" --baseline pg-base --metric 'attn_*' --reason "kept for prune" --db "$A"
echo "ok - ack, ack list, ack rm"
ok a-trend trend --metric kv_bytes_per_token --format json --db "$A"
ok a-report report --out "$out/a-report" --db "$A"
grep -q "<svg" "$out/a-report/index.html" || fail "the report has no plot" "$out/a-report/index.html"
echo "ok - trend, report"
cat >"$work/files/ab.json" <<'JSON'
{"name": "ab", "repetitions": 1, "warmup": 0, "noise_threshold": 1.0,
 "models": [{"name": "syn-7b", "backend": "synthetic", "preset": "llama-7b-gqa", "sample_layers": 1}],
 "workloads": [{"name": "rag-1k", "kind": "rag", "context_tokens": 1024, "gen_tokens": 16}],
 "policies": [{"name": "q4-hybrid", "k": "q4", "v": "q4", "sparse": {"selector": "hybrid", "window": 64, "budget": 0.25}}]}
JSON
kvb a-ab ab --baseline-bin "$kvbench" --candidate-bin "$kvbench" --suite "$work/files/ab.json" --repetitions 2 --rules "$rules" --db "$A"
gate_ok a-ab
[ "$(q kvb_a "SELECT count(*) FROM runs WHERE tags LIKE '%ab:baseline%' OR tags LIKE '%ab:candidate%'")" = 2 ] ||
  fail "ab did not store its two runs" "$out/a-ab.out"
echo "ok - ab (exit $rc, two runs stored)"
ok a-shard run "${tiny[@]}" --shard 1/1 --run-group pg-merge --db "$work/files/a-shard.sqlite"
ok a-merge merge --into "$A" --json "$work/files/a-shard.sqlite"
merged=$(json_field "$out/a-merge.out" run_id)
[ "$(q kvb_a "SELECT status FROM runs WHERE id = $merged")" = complete ] || fail "the merged run $merged is not complete" "$out/a-merge.out"
echo "ok - merge of a SQLite shard --into PostgreSQL (run $merged)"
runs_before=$(q kvb_a "SELECT count(*) FROM runs")
ok a-prune-dry prune --older-than 0 --keep 1 --dry-run --db "$A"
[ "$(q kvb_a "SELECT count(*) FROM runs")" = "$runs_before" ] || fail "prune --dry-run removed runs" "$out/a-prune-dry.out"
ok a-prune prune --older-than 0 --keep 1 --db "$A"
[ "$(q kvb_a "SELECT count(*) FROM runs WHERE id IN ($run1, $run2)")" = 2 ] ||
  fail "prune removed the baseline's run $run1 or the acknowledged run $run2" "$out/a-prune.out"
[ "$(q kvb_a "SELECT count(*) FROM cases WHERE run_id NOT IN (SELECT id FROM runs)")" = 0 ] || fail "prune left cases of removed runs" "$out/a-prune.out"
echo "ok - prune --dry-run changes nothing, prune keeps the runs baselines and acks hold ($runs_before runs -> $(q kvb_a "SELECT count(*) FROM runs"))"

# --- b. four writers at once, logging in by the pgpass file --------------------------------------
B=$(redacted kvb_b)
background_pids=
for i in 1 2 3 4; do
  (cd "$cwd" && PGPASSFILE=$pgpass exec "$kvbench" run "${tiny[@]}" --tag "writer-$i" --json --db "$B") >"$out/b-writer-$i.out" 2>"$out/b-writer-$i.err" &
  background_pids+=" $!"
done
wait_all b-writer "concurrent writer"
for i in 1 2 3 4; do
  ! grep -Eq "internal error|deadlock|ERROR:" "$out/b-writer-$i.err" || fail "concurrent writer $i reported an error" "$out/b-writer-$i.err"
done
complete=$(PGPASSFILE=$pgpass count_listed "$B" complete)
[ "$complete" = 4 ] || fail "list shows $complete complete runs after four writers, expected 4" "$out/count-listed.out"
[ "$(q kvb_b "SELECT count(DISTINCT c.run_id) FROM metrics m JOIN cases c ON c.id = m.case_id")" = 4 ] || fail "not every writer's metrics are stored"
echo "ok - four writers at once (pgpass): four complete runs, each with its rows"

# --- c. a writer killed on another host reads aborted after its heartbeat timeout ----------------
C=$(uri kvb_c)
(cd "$cwd" && exec "$kvbench" run --suite smoke --repetitions 10 --heartbeat-timeout 4 --tag killed --db "$C") >"$out/c-killed.out" 2>"$out/c-killed.err" &
victim=$!
background_pids=$victim
deadline=$((SECONDS + 60))
until victim_run=$(q kvb_c "SELECT id FROM runs WHERE tags LIKE '%killed%'" 2>/dev/null) && [ -n "$victim_run" ]; do
  kill -0 "$victim" 2>/dev/null || fail "the writer to be killed ended before it stored its run" "$out/c-killed.err"
  [ "$SECONDS" -lt "$deadline" ] || fail "the writer to be killed stored no run in 60 s" "$out/c-killed.err"
  sleep 0.2
done
wait_for_status "$C" "$victim_run" running 30 "the live writer"
# Another host's run: this host cannot see its process, only its heartbeat.
q kvb_c "UPDATE runs SET boot_id = 'another-host' WHERE id = $victim_run"
sleep 5
[ "$(listed_status "$C" "$victim_run" c-alive)" = running ] ||
  fail "a live writer of another host read other than running past its 4 s heartbeat timeout" "$out/c-alive.out" "$out/c-killed.err"
kill -0 "$victim" 2>/dev/null || fail "the writer ended before it was killed (make its run longer)" "$out/c-killed.err"
kill -9 "$victim"
wait "$victim" 2>/dev/null || true
background_pids=
wait_for_status "$C" "$victim_run" aborted 14 "the killed writer"
[ "$(q kvb_c "SELECT status FROM runs WHERE id = $victim_run")" = running ] || fail "a reader wrote the killed run's status (readers never write)"
ok c-next-writer run "${tiny[@]}" --heartbeat-timeout 4 --db "$C"
[ "$(q kvb_c "SELECT status FROM runs WHERE id = $victim_run")" = aborted ] || fail "the next writer did not mark the killed run aborted" "$out/c-next-writer.err"
echo "ok - a live writer of another host stays running past the timeout; killed, it reads aborted, and the next writer marks it so"

# --- d. gate and report on PostgreSQL equal those on SQLite for the same runs --------------------
D=$(uri kvb_d)
lite=$work/files/d-merged.sqlite
for group in 1 2; do
  ok "d-shard-$group" run --suite smoke --filter 'multimodal-1i|roleplay-4t/q4' --repetitions 2 --shard 1/1 --run-group "d-$group" \
    --db "$work/files/d-shard-$group.sqlite"
  ok "d-merge-pg-$group" merge --into "$D" --json "$work/files/d-shard-$group.sqlite"
  ok "d-merge-lite-$group" merge --into "$lite" --json "$work/files/d-shard-$group.sqlite"
  pg_id=$(json_field "$out/d-merge-pg-$group.out" run_id)
  lite_id=$(json_field "$out/d-merge-lite-$group.out" run_id)
  [ "$pg_id/$lite_id" = "$group/$group" ] ||
    fail "merged run ids into fresh databases: PostgreSQL $pg_id, SQLite $lite_id, expected $group"
done
# The database's name is the one thing allowed to differ, and the time each gate stored its
# verdict (the two gates ran a moment apart).
normalize() {  # files..., each rewritten with every form of either database's name as DB
  python3 - "$@" "$(uri kvb_d)" "$(redacted kvb_d)" "$lite" <<'PY'
import re, sys
files, names = sys.argv[1:-3], sys.argv[-3:]
for path in files:
    text = open(path, encoding="utf-8").read()
    for name in names:
        text = text.replace(name, "DB")
    text = re.sub(r"stored verdict (\d+) of [0-9T:-]+Z", r"stored verdict \1 of TIME", text)
    open(path + ".normalized", "w", encoding="utf-8").write(text)
PY
}
same() {  # $1 $2: files that must be equal once normalized; $3: what they are
  normalize "$1" "$2"
  diff -u "$1.normalized" "$2.normalized" >"$out/d-diff.txt" || fail "$3 differ between PostgreSQL and SQLite" "$out/d-diff.txt"
}
for store in pg lite; do
  db=$D
  [ "$store" = lite ] && db=$lite
  kvb "d-gate-$store" gate --baseline 1 --candidate 2 --json "$out/d-gate-$store.json" --markdown "$out/d-gate-$store.md" --db "$db"
  gate_ok "d-gate-$store"
  echo "$rc" >"$out/d-gate-$store.rc"
  ok "d-report-$store" report --out "$out/d-report-$store" --db "$db"
  ok "d-show-$store" show 2 --json --db "$db"
  ok "d-export-$store" export 2 --format csv --db "$db"
done
same "$out/d-gate-pg.rc" "$out/d-gate-lite.rc" "gate exit codes"
same "$out/d-gate-pg.out" "$out/d-gate-lite.out" "gate outputs"
same "$out/d-gate-pg.json" "$out/d-gate-lite.json" "gate --json files"
same "$out/d-gate-pg.md" "$out/d-gate-lite.md" "gate --markdown files"
same "$out/d-report-pg/index.html" "$out/d-report-lite/index.html" "reports"
same "$out/d-show-pg.out" "$out/d-show-lite.out" "show --json outputs"
same "$out/d-export-pg.out" "$out/d-export-lite.out" "CSV exports"
echo "ok - gate (exit $(cat "$out/d-gate-pg.rc")), report, show and export equal on PostgreSQL and SQLite for the same merged runs"

# --- i. shards written straight into the server, merged there by the nightly script -------------
I=$(uri kvb_i)
night() {  # $1: the night's run group; two shards into the server at once, then ci/nightly.sh
  background_pids=
  # The two "machines" share this one's cores, so each waits for the other: without the noise
  # threshold at 1 every repetition would be noisy, and a mostly noisy night is never promoted.
  for shard in 1 2; do
    (cd "$cwd" && exec "$kvbench" run --suite smoke --filter 'multimodal-1i|roleplay-4t/q4' --repetitions 1 --tag nightly \
      --noise-threshold 1 --shard "$shard/2" --run-group "$1" --json --db "$I") >"$out/i-$1-shard-$shard.out" 2>"$out/i-$1-shard-$shard.err" &
    background_pids+=" $!"
  done
  wait_all "i-$1-shard" "shard into the server, of $1,"
  [ "$(q kvb_i "SELECT count(*) FROM runs WHERE tags LIKE '%run-group=$1%'")" = 2 ] || fail "the two shards of $1 did not store two runs"
  shard_cases=$(q kvb_i "SELECT count(*) FROM cases c JOIN runs r ON r.id = c.run_id WHERE r.tags LIKE '%run-group=$1%'")
  rc=0
  (cd "$cwd" && KVBENCH=$kvbench exec bash "$repo/ci/nightly.sh" --db "$I" --run-group "$1" --out "$out/i-$1" --promote --sim-suite none) \
    >"$out/i-$1.out" 2>"$out/i-$1.err" || rc=$?
  # A gate's verdict on one noisy repetition a side is a result here: pass, regressed or unreliable.
  case $rc in 0 | 1 | 5) ;; *) fail "ci/nightly.sh --run-group $1 on the server exited $rc" "$out/i-$1.err" "$out/i-$1.out" ;; esac
  [ "$(q kvb_i "SELECT count(*) FROM runs WHERE tags LIKE '%run-group=$1%'")" = 1 ] ||
    fail "the shard runs of $1 are still on the server beside the merged run" "$out/i-$1.err"
  merged_run=$(q kvb_i "SELECT id FROM runs WHERE tags LIKE '%run-group=$1%' AND tags LIKE '%merged%' AND status = 'complete'")
  [ -n "$merged_run" ] || fail "no complete merged run of $1" "$out/i-$1.err"
  [ "$(q kvb_i "SELECT count(*) FROM cases WHERE run_id = $merged_run")" = "$shard_cases" ] ||
    fail "the merged run of $1 does not hold its shards' $shard_cases cases"
  [ -s "$out/i-$1/report/index.html" ] || fail "the nightly of $1 wrote no report" "$out/i-$1.err"
}
night night-1
[ "$(q kvb_i "SELECT run_id FROM baselines WHERE name = 'nightly/main'")" = "$merged_run" ] ||
  fail "the first night did not become the baseline" "$out/i-night-1.err"
night night-2
[ -s "$out/i-night-2/gate.json" ] || fail "the second night was not gated" "$out/i-night-2.err"
[ "$(q kvb_i "SELECT count(*) FROM verdicts")" = 1 ] || fail "the second night's gate stored no verdict on the server" "$out/i-night-2.err"
[ "$(q kvb_i "SELECT count(*) FROM runs")" = 2 ] || fail "two nights should leave two runs on the server"
echo "ok - two nights of two shards written straight into the server, each merged there by ci/nightly.sh --run-group (the shard runs replaced), reported, the first promoted and the second gated against it (exit $rc)"

# --- f. bad URIs and a wrong password: exit 2, named without the password ------------------------
bad_uri() {  # $1: name, $2: what stderr must contain, the rest: arguments
  local name=$1 named=$2
  shift 2
  kvb "$name" "$@"
  [ "$rc" = 2 ] || fail "$name: exit $rc, expected 2" "$out/$name.err" "$out/$name.out"
  grep -qF -- "$named" "$out/$name.err" || fail "$name: stderr does not name $named" "$out/$name.err"
  ! grep -qE "$password|wrong-pw-46" "$out/$name.err" "$out/$name.out" || fail "$name: the password is in the message" "$out/$name.err"
  grep -q "internal error" "$out/$name.err" && fail "$name: an internal error" "$out/$name.err"
  return 0
}
bad_uri f-malformed "postgresql://kvb@[bad" list runs --db "postgresql://kvb:$password@[bad"
bad_uri f-unreachable "postgresql://kvb@/nodb?host=/nonexistent" list runs --db "postgresql://kvb:$password@/nodb?host=/nonexistent"
bad_uri f-wrong-password "$(redacted kvb_a)" list runs --db "postgresql://kvb:wrong-pw-46@/kvb_a?host=$pg"
bad_uri f-wrong-password-run "$(redacted kvb_a)" run "${tiny[@]}" --db "postgresql://kvb:wrong-pw-46@/kvb_a?host=$pg"
bad_uri f-password-parameter "$(redacted kvb_a)" list runs --db "postgresql://kvb@/kvb_a?host=$pg&password=wrong-pw-46"
bad_uri f-shard-unreachable "postgresql://kvb@/nodb?host=/nonexistent" merge --into "$work/files/never.sqlite" "postgresql://kvb:$password@/nodb?host=/nonexistent"
# A URI where no argument takes one: the usage error echoes it, without its password.
bad_uri f-stray-argument "$(redacted kvb_a)" list runs "$(uri kvb_a)"
echo "ok - a malformed URI, an unreachable server, a wrong password, an unreachable server given as a shard and a stray URI argument exit 2, named without the password"

# --- g. the server goes away mid-run ---------------------------------------------------------------
G=$(uri kvb_g)
(cd "$cwd" && exec "$kvbench" run --suite smoke --repetitions 5 --heartbeat-timeout 4 --db "$G") >"$out/g-run.out" 2>"$out/g-run.err" &
writer=$!
background_pids=$writer
deadline=$((SECONDS + 60))
until stored=$(q kvb_g "SELECT count(*) FROM metrics" 2>/dev/null) && [ "$stored" -gt 0 ]; do
  kill -0 "$writer" 2>/dev/null || fail "the run ended before it stored a repetition" "$out/g-run.err"
  [ "$SECONDS" -lt "$deadline" ] || fail "the run stored no repetition in 60 s" "$out/g-run.err"
  sleep 0.1
done
stop_server fast
wait_exit "$writer" 60 || fail "the run did not end within 60 s of the server going away" "$out/g-run.err"
background_pids=
[ "$rc" = 2 ] || fail "the run exited $rc when the server went away, expected 2" "$out/g-run.err"
grep -qF "$(redacted kvb_g)" "$out/g-run.err" || fail "the run's error does not name the server" "$out/g-run.err"
start_server
after=$(q kvb_g "SELECT count(*) FROM metrics")
[ "$after" -ge "$stored" ] || fail "the server lost stored rows: $stored before it stopped, $after after"
# Each repetition is stored whole or not at all: a case's repetitions have as many rows each.
[ "$(q kvb_g "SELECT count(*) FROM (SELECT case_id FROM (SELECT case_id, repetition, count(*) AS n FROM metrics GROUP BY case_id, repetition) r
              GROUP BY case_id HAVING count(DISTINCT n) > 1) c")" = 0 ] || fail "a repetition is stored in part"
g_run=$(q kvb_g "SELECT max(id) FROM runs")
wait_for_status "$G" "$g_run" aborted 14 "the run whose server went away"
echo "ok - the server went away mid-run: exit 2 naming it, $after rows of whole repetitions kept, the run reads aborted"

# --- h0. a server at schema 7 takes the step to 8 (the sim clock) -----------------------------------
# Rewound by hand to what a version-7 kvbench created: the clock's constraint without `sim`.
q kvb_d "ALTER TABLE metrics DROP CONSTRAINT metrics_clock_check"
q kvb_d "ALTER TABLE metrics ADD CONSTRAINT metrics_clock_check CHECK (clock IN ('host', 'model', 'exact', 'cpu'))"
q kvb_d "UPDATE kvbench_schema SET version = 7"
kvb h0-migrate baseline set migrated 1 --db "$D"
[ "$rc" = 0 ] || fail "a writer on a schema-7 server exited $rc" "$out/h0-migrate.err"
[ "$(q kvb_d "SELECT version FROM kvbench_schema")" = 8 ] || fail "a writer left the schema-7 server at $(q kvb_d "SELECT version FROM kvbench_schema")"
q kvb_d "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'metrics_clock_check'" | grep -q "'sim'" ||
  fail "the step to 8 did not let metrics take the sim clock"
echo "ok - a schema-7 server migrates to 8: its metrics take the sim clock"

# --- h. a schema newer than the binary --------------------------------------------------------------
q kvb_d "UPDATE kvbench_schema SET version = 999"
for command in "list runs" "baseline set newer 1"; do
  name=h-$(echo "$command" | tr ' ' -)
  # shellcheck disable=SC2086  # the command's words
  kvb "$name" $command --db "$D"
  [ "$rc" = 2 ] || fail "kvbench $command on a schema-999 server exited $rc, expected 2" "$out/$name.err"
  grep -q "schema version 999" "$out/$name.err" || fail "kvbench $command does not say the schema version is 999" "$out/$name.err"
done
[ "$(q kvb_d "SELECT version FROM kvbench_schema")" = 999 ] || fail "a writer changed the newer schema's version"
echo "ok - a newer schema (999) is refused by a reader and a writer, exit 2, and left as it is"

# --- e. the password is nowhere but in the command lines ---------------------------------------------
mkdir -p "$work/dumps"
for db in kvb_a kvb_b kvb_c kvb_d kvb_g kvb_i; do
  "$pg_bin/pg_dump" -h "$pg" -U postgres -d "$db" -f "$work/dumps/$db.sql"
done
grep -Eq '^COPY [a-z_]+\.runs ' "$work/dumps/kvb_a.sql" || fail "the dump of kvb_a holds no runs table" "$work/dumps/kvb_a.sql"
# grep: 0 found, 1 not found, 2 a file it could not read (fails the test: unscanned is unproven).
grep -rnF "$password" "$out" "$cwd" "$work/dumps" "$pg/server.log" >"$work/leaks.txt" || [ $? = 1 ] || fail "the credential scan could not read a file"
if [ -s "$work/leaks.txt" ]; then
  sed -i "s|^$work/||" "$work/leaks.txt"
  fail "the password is in an output, a stored row or the server log (file:line below)" "$work/leaks.txt"
fi
echo "ok - the password is in no output ($(find "$out" -type f | wc -l) files), no stored row (pg_dump of 6 databases) and not in the server log"
echo "PASSED ($SECONDS s)"
