#!/usr/bin/env bash
# The size rule for engine/ and workloads/: no source file over 600 lines and no function over
# 120 (clang-tidy's readability-function-size, lines including whitespace and comments). The
# attention kernels' arch/ folders and generated tables are outside it: a kernel's unrolled
# body is one thought. Prints the largest files and functions that remain, and fails naming each
# one over its limit.
#   ci/code-size.sh [BUILD_DIR]   (default build/: a configured tree with compile_commands.json)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
max_file=600
max_function=120
listed=8
[[ -f $build/compile_commands.json ]] || { echo "ci/code-size.sh: $build/compile_commands.json: not found (configure the tree first)" >&2; exit 2; }
command -v clang-tidy-14 >/dev/null || { echo "ci/code-size.sh: clang-tidy-14: not installed (ci/install-deps.sh)" >&2; exit 2; }

in_scope() { grep -E '^(engine|workloads)/' | grep -vE '^engine/attention/arch/|_table\.(h|cpp)$|generated'; }
failed=0

echo "largest source files (limit $max_file lines):"
files=$(git ls-files 'engine/*.cpp' 'engine/*.h' 'workloads/*.cpp' 'workloads/*.h' | in_scope)
sizes=$(for f in $files; do printf '%6d %s\n' "$(wc -l <"$f")" "$f"; done | sort -rn)
head -n "$listed" <<<"$sizes"
while read -r n f; do
  [[ -z $f ]] && continue
  if (( n > max_file )); then echo "ci/code-size.sh: $f: $n lines, over $max_file" >&2; failed=1; fi
done <<<"$sizes"

# The translation units that compile engine/ and workloads/ (unity batches or single sources).
mapfile -t units < <(python3 - "$build" <<'EOF'
import json, os, sys
build = sys.argv[1]
for e in json.load(open(os.path.join(build, "compile_commands.json"))):
    f = e["file"]
    if "/CMakeFiles/kv_" in f or "/CMakeFiles/kvbench_workloads" in f or "/engine/" in f or "/workloads/" in f:
        if "/arch/" not in f and "/tests/" not in f:
            print(f)
EOF
)
(( ${#units[@]} > 0 )) || { echo "ci/code-size.sh: no engine/ or workloads/ sources in $build/compile_commands.json" >&2; exit 2; }

root=$(pwd)
report=$(mktemp)
trap 'rm -f "$report"' EXIT
# Threshold 60: clang-tidy names every function above it, so the largest can be listed.
printf '%s\n' "${units[@]}" | xargs -P "$(nproc)" -n 2 clang-tidy-14 -p "$build" --quiet \
  --header-filter="^$root/(engine|workloads)/" --extra-arg=-Wno-unknown-warning-option \
  --checks='-*,readability-function-size' \
  --config='{CheckOptions: [{key: readability-function-size.LineThreshold, value: 60}]}' >"$report" 2>/dev/null || true
# A source clang cannot parse would have its functions go unmeasured: that is no pass.
if grep -q ': error: ' "$report"; then
  grep ': error: ' "$report" | head -n 10 >&2
  echo "ci/code-size.sh: clang-tidy could not parse every source (above): sizes unchecked" >&2
  exit 2
fi
# "FILE:LINE:COL: warning: function 'NAME' exceeds ..." then "FILE:LINE:COL: note: N lines including ..."
functions=$(python3 - "$report" "$root/" <<'EOF'
import re, sys
report, root = sys.argv[1], sys.argv[2]
name, seen = {}, {}
for line in open(report, errors="replace"):
    m = re.match(r"(\S+?):(\d+):\d+: warning: function '([^']+)' exceeds", line)
    if m:
        name[(m[1], m[2])] = m[3]
        continue
    m = re.match(r"(\S+?):(\d+):\d+: note: (\d+) lines including", line)
    if m and (m[1], m[2]) in name:
        path = m[1][len(root):] if m[1].startswith(root) else m[1]
        seen[(path, m[2])] = (int(m[3]), name[(m[1], m[2])])
for (path, line), (n, fn) in sorted(seen.items(), key=lambda kv: -kv[1][0]):
    if path.startswith(("engine/", "workloads/")) and not path.startswith("engine/attention/arch/"):
        print(f"{n:6d} {path}:{line} {fn}")
EOF
)
echo "largest functions (limit $max_function lines):"
head -n "$listed" <<<"$functions"
while read -r n where fn; do
  [[ -z $where ]] && continue
  if (( n > max_function )); then echo "ci/code-size.sh: $where: function $fn: $n lines, over $max_function" >&2; failed=1; fi
done <<<"$functions"
exit $failed
