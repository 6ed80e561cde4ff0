#!/usr/bin/env python3
"""Median of repeated kvbench-micro runs as a Markdown table.

Usage: median_table.py run1.json run2.json run3.json
Each file is `kvbench-micro --benchmark_out=FILE --benchmark_out_format=json`. Prints, per
benchmark, the median real time and bytes_per_second and the highest noise_cpu_pct of the runs
(others' share of the CPU while it ran), then the ratios the runs allow: q4 vs f32 decode at 32K
and q4 KV bandwidth vs BM_StreamRead, and each BM_SparseDecode selector at 10% against
a tenth of the q4 full decode. Each ratio is given from the medians and, beside it,
within each run (both figures from the same run, seconds apart), as the median and range over
the runs: this VM's memory bandwidth drifts from minute to minute, and a ratio of figures
measured together drifts less than one of medians taken at different times.
"""
import json
import statistics
import sys


def load(path):
    with open(path) as f:
        data = json.load(f)
    rows = {}
    for b in data["benchmarks"]:
        if b.get("run_type", "iteration") != "iteration":
            continue
        rows[b["name"]] = b
    return data["context"], rows


def main(paths):
    runs = [load(p) for p in paths]
    context = runs[0][0]
    names = list(runs[0][1].keys())
    med = {}
    print(f"host: {context.get('host_name', '?')}, {context.get('num_cpus', '?')} cpus, "
          f"isa {context.get('kvbench_isa', '?')}, runs: {len(runs)} (median)")
    print()
    print("| benchmark | real time | bytes/s | noise (max of runs) |")
    print("|---|---:|---:|---:|")
    for name in names:
        times = [r[1][name]["real_time"] for r in runs if name in r[1]]
        unit = runs[0][1][name]["time_unit"]
        bps = [r[1][name].get("bytes_per_second", 0.0) for r in runs if name in r[1]]
        noise = [r[1][name]["noise_cpu_pct"] for r in runs if name in r[1] and "noise_cpu_pct" in r[1][name]]
        med[name] = (statistics.median(times), unit, statistics.median(bps))
        gbps = statistics.median(bps) / 1e9
        noise_text = f"{max(noise):.1f}%" if noise else "-"
        print(f"| {name} | {statistics.median(times):.3f} {unit} | {gbps:.2f} GB/s | {noise_text} |")

    def find(prefix):
        for name, value in med.items():
            if name.startswith(prefix):
                return value
        return None

    def find_row(rows, prefix):
        for name, row in rows.items():
            if name.startswith(prefix):
                return row
        return None

    def per_run(numerator, denominator, ratio, fmt="{:.2f}x"):
        """`ratio` of the two rows within each run that has both: ' (per run: median, lo-hi)'."""
        values = []
        for _, rows in runs:
            a, b = find_row(rows, numerator), find_row(rows, denominator)
            if a and b:
                values.append(ratio(a, b))
        if not values:
            return ""
        return (f" (per run: {fmt.format(statistics.median(values))}, "
                f"{fmt.format(min(values))}-{fmt.format(max(values))})")

    f32 = find("BM_DecodeAttention/f32/32768")
    q4 = find("BM_DecodeAttention/q4/32768")
    stream = find("BM_StreamRead/")
    print()
    if f32 and q4:
        print(f"q4 vs f32 decode at 32K: {f32[0] / q4[0]:.2f}x faster (target >= 3x)"
              + per_run("BM_DecodeAttention/f32/32768", "BM_DecodeAttention/q4/32768",
                        lambda a, b: a["real_time"] / b["real_time"]))
    if q4 and stream:
        print(f"q4 KV read bandwidth / BM_StreamRead: {100.0 * q4[2] / stream[2]:.0f}% (target >= 50%)"
              + per_run("BM_DecodeAttention/q4/32768", "BM_StreamRead/",
                        lambda a, b: 100.0 * a["bytes_per_second"] / b["bytes_per_second"], "{:.0f}%"))
    for selector in ("hybrid", "quest", "h2o", "window"):
        sparse = find(f"BM_SparseDecode/{selector}/10/32768")
        if q4 and sparse:
            print(f"{selector} 10% vs a tenth of q4 full decode at 32K: {sparse[0] / (0.1 * q4[0]):.2f}x"
                  + (" (target <= 1.3x)" if selector == "hybrid" else "")
                  + per_run(f"BM_SparseDecode/{selector}/10/32768", "BM_DecodeAttention/q4/32768",
                            lambda a, b: a["real_time"] / (0.1 * b["real_time"])))


if __name__ == "__main__":
    main(sys.argv[1:])
