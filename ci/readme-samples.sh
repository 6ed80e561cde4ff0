#!/usr/bin/env bash
# Rewrites the README's sample outputs from the binary: the block under each
# `<!-- sample: NAME -->` marker gets what its command prints now (the case rows past the
# second elided with "..." but the last). tests/e2e/readme_commands_test.sh checks that each
# sample still has the shape the binary prints.
#
# usage: ci/readme-samples.sh [KVBENCH]   (default build/bin/kvbench)
set -euo pipefail
cd "$(dirname "$0")/.."
kvbench=${1:-build/bin/kvbench}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "readme-samples: smoke-summary: kvbench run --suite smoke (about 15 s)"
"$kvbench" run --suite smoke --db "$work/results.sqlite" > "$work/smoke-summary.txt" 2> /dev/null

python3 - README.md "$work" <<'PY'
import os, re, sys
readme, work = sys.argv[1], sys.argv[2]
text = open(readme, encoding="utf-8").read()

def elided(output):
    # Header, blank, case rows (a name line and a figures line each), blank, notes.
    lines = output.rstrip("\n").split("\n")
    blanks = [i for i, l in enumerate(lines) if l == ""]
    if len(blanks) < 2:
        return output
    first, last = blanks[0], blanks[-1]
    header_end = first + 1
    while header_end < last and lines[header_end].startswith(" "):
        header_end += 1
    rows = lines[header_end:last]
    if len(rows) > 6:
        rows = rows[:4] + ["..."] + rows[-2:]
    return "\n".join(lines[:header_end] + rows + lines[last:]) + "\n"

def replace(m):
    name = m.group(1)
    path = f"{work}/{name}.txt"
    if not os.path.exists(path):
        sys.exit(f"readme-samples: no command makes sample {name}")
    return f"<!-- sample: {name} -->\n```\n{elided(open(path, encoding='utf-8').read())}```"

new = re.sub(r"<!-- sample: ([^ ]+) -->\n```\n.*?```", replace, text, flags=re.S)
tmp = readme + ".tmp"
open(tmp, "w", encoding="utf-8").write(new)
os.replace(tmp, readme)
print(f"readme-samples: {readme} rewritten")
PY
