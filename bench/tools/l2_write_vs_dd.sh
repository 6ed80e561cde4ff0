#!/usr/bin/env bash
# The L2 write target: BM_L2Write's sustained segment bandwidth against
#   dd if=/dev/zero of=DIR/x bs=4M count=256 oflag=direct
# on the same filesystem, in the same run, three times each (interleaved); prints the medians
# and their ratio. Usage: bench/tools/l2_write_vs_dd.sh [DIR] [build dir]
set -euo pipefail
dir=${1:-${TMPDIR:-/tmp}}
build=${2:-build}
dd_rates=() l2_rates=()
for run in 1 2 3; do
  out=$(dd if=/dev/zero of="$dir/kvbench-dd-probe" bs=4M count=256 oflag=direct 2>&1 | tail -n 1)
  rm -f "$dir/kvbench-dd-probe"
  # "... copied, 1.23 s, 872 MB/s": bytes / seconds, decimal MB/s
  bytes=$(echo "$out" | awk '{print $1}')
  secs=$(echo "$out" | sed -E 's/.*copied, ([0-9.,]+) s.*/\1/' | tr , .)
  dd_rates+=("$(awk -v b="$bytes" -v s="$secs" 'BEGIN{printf "%.1f", b/s/1e6}')")
  rate=$("$build/bin/kvbench-micro" --l2-dir "$dir" --benchmark_filter='^BM_L2Write' --benchmark_format=json 2>/dev/null |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print("%.1f" % (d["benchmarks"][0]["bytes_per_second"]/1e6))')
  l2_rates+=("$rate")
done
median() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
dd_median=$(median "${dd_rates[@]}")
l2_median=$(median "${l2_rates[@]}")
echo "dd oflag=direct bs=4M: ${dd_rates[*]} MB/s (median $dd_median)"
echo "BM_L2Write:            ${l2_rates[*]} MB/s (median $l2_median)"
awk -v a="$l2_median" -v b="$dd_median" 'BEGIN{printf "ratio: %.2f (target >= 0.80)\n", a/b}'
