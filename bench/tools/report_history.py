#!/usr/bin/env python3
"""Build a report-sized history from one stored run: copies of it, with noise and a planted step.

    bench/tools/report_history.py SOURCE.sqlite RUN_ID OUT.sqlite [--runs 30] [--step-at 20] [--step 0.15]

OUT gets SOURCE's database copied, then RUN_ID's rows (its cases, metrics, series, histograms and
events) copied --runs - 1 more times as new complete runs of the same suite, a day apart. Every
host-clock figure of a copy is multiplied by a seeded noise of about 2%; from run index --step-at
on, time figures (unit ms) grow by --step and rates (tokens/s) shrink by it: a regression the
trend's change points and the gate should find. Exact and model figures stay as they are. This
is synthetic history for sizing and timing reports - the copies are not measurements, and the
runs say so in a tag (history:copy-of-RUN_ID).
"""
import argparse
import random
import shutil
import sqlite3
from datetime import datetime, timedelta


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source")
    parser.add_argument("run_id", type=int)
    parser.add_argument("out")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--step-at", type=int, default=20)
    parser.add_argument("--step", type=float, default=0.15)
    args = parser.parse_args()

    shutil.copyfile(args.source, args.out)
    db = sqlite3.connect(args.out)
    db.execute("PRAGMA foreign_keys = ON")
    run = db.execute("SELECT started_at, ended_at, status, pid, boot_id, heartbeat_at, git_sha, git_dirty, config_json, config_hash, "
                     "tags, meta_json FROM runs WHERE id = ?", (args.run_id,)).fetchone()
    if run is None or run[2] != "complete":
        raise SystemExit(f"{args.source}: run {args.run_id} is not a complete run")
    cases = db.execute("SELECT id, name, model, workload, policy, soc, skipped_reason, status, error FROM cases WHERE run_id = ? "
                       "ORDER BY id", (args.run_id,)).fetchall()
    start = datetime.strptime(run[0], "%Y-%m-%dT%H:%M:%SZ")
    rng = random.Random(7)
    for copy in range(1, args.runs):
        when = (start + timedelta(days=copy)).strftime("%Y-%m-%dT%H:%M:%SZ")
        tags = ",".join(t for t in [run[10], f"history:copy-of-{args.run_id}"] if t)
        cur = db.execute("INSERT INTO runs (started_at, ended_at, status, pid, boot_id, heartbeat_at, git_sha, git_dirty, config_json, "
                         "config_hash, tags, meta_json) VALUES (?, ?, 'complete', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (when, when, run[3], run[4], when, run[6], run[7], run[8], run[9], tags, run[11]))
        new_run = cur.lastrowid
        stepped = copy >= args.step_at
        for case in cases:
            new_case = db.execute("INSERT INTO cases (run_id, name, model, workload, policy, soc, skipped_reason, status, error) "
                                  "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", (new_run,) + tuple(case[1:])).lastrowid
            for rep, name, value, na, unit, clock, x, noisy in db.execute(
                    "SELECT repetition, name, value, na_reason, unit, clock, extrapolated, noisy FROM metrics WHERE case_id = ?",
                    (case[0],)).fetchall():
                if value is not None and clock == "host":
                    value *= rng.gauss(1.0, 0.02)
                    if stepped and unit == "ms":
                        value *= 1.0 + args.step
                    elif stepped and unit == "tokens/s":
                        value /= 1.0 + args.step
                db.execute("INSERT INTO metrics VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", (new_case, rep, name, value, na, unit, clock, x, noisy))
            for table in ("series", "histograms", "events"):
                columns = [c[1] for c in db.execute(f"PRAGMA table_info({table})")][1:]
                db.execute(f"INSERT INTO {table} (case_id, {', '.join(columns)}) SELECT ?, {', '.join(columns)} FROM {table} "
                           "WHERE case_id = ?", (new_case, case[0]))
    db.commit()
    print(f"{args.out}: run {args.run_id} and {args.runs - 1} copies of it (step of {args.step:+.0%} from copy {args.step_at})")


if __name__ == "__main__":
    main()
