#!/usr/bin/env bash
# Every command the README and docs/tutorial.md show, run in order as a reader would, with the
# substitutions listed below where the real command is too slow for a test or is this test's
# own runner; the JSON blocks a command names are written to their files first. Each command
# must exit as documented. The summary the README shows after `run --suite smoke` must have the
# shape the binary prints now: its header, case rows and notes, numbers aside (docs/testing.md).
#
# usage: readme_commands_test.sh KVBENCH SOURCE_DIR
set -euo pipefail

kvbench=$(realpath "$1")
source_dir=$(realpath "$2")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

python3 - "$source_dir" "$work" > "$work/commands.sh" <<'PY'
import re, shlex, sys
source, work = sys.argv[1], sys.argv[2]

# (pattern, replacement, why): applied in order to every command line. Documented in docs/testing.md.
SUBSTITUTIONS = [
    (r"^ci/(quickstart|test)\.sh\b.*", None, "not run: this test is one of ci/test.sh's steps, and ci/quickstart.sh runs the nightly suite"),
    (r"\bbuild/bin/kvbench\b", '"$KVBENCH"', "the binary under test"),
    (r"/tmp/kv\b", '"$WORK"/kv', "a scratch directory"),
    (r"(\$KVBENCH\" calibrate\b)", r"\1 --quick", "the full calibration takes minutes"),
    (r"(\$KVBENCH\" (?:run|sweep) --suite soc-reference\b)", r"\1 --filter q4-hybrid-10 --repetitions 1", "a whole suite takes minutes"),
    (r"(\$KVBENCH\" run --suite prefix\b)", r"\1 --filter roleplay --repetitions 1", "a whole suite takes minutes"),
]
# Exit codes a command may end with besides 0, and why.
EXITS = [(r"\$KVBENCH\" gate\b", "0 1 5", "two runs on one busy machine may differ by noise: the command is under test, not the machine")]

out = ["set -u"]
index = 0
for doc in ("README.md", "docs/tutorial.md"):
    text = open(f"{source}/{doc}", encoding="utf-8").read()
    # Blocks in document order: ```sh commands, <!-- file: NAME --> JSON, <!-- sample: NAME --> output.
    for m in re.finditer(r"(?:<!-- (file|sample): ([^ ]+) -->\n)?```(\w*)\n(.*?)```", text, re.S):
        marker, name, lang, body = m.group(1), m.group(2), m.group(3), m.group(4)
        if marker == "file":
            out.append(f"cat > {shlex.quote(name)} <<'KVBENCH_README_EOF'\n{body}KVBENCH_README_EOF")
            continue
        if marker == "sample":
            open(f"{work}/sample-{name}.txt", "w", encoding="utf-8").write(body)
            out.append(f"cp \"$WORK/out-$LAST.txt\" \"$WORK/output-{name}.txt\"")
            continue
        if lang != "sh":
            continue
        for line in body.replace("\\\n", " ").splitlines():
            command = line.strip()
            if not command or command.startswith("#"):
                continue
            shown = command
            notes = []
            for pattern, replacement, why in SUBSTITUTIONS:
                if re.search(pattern, command):
                    if replacement is None:
                        command = None
                        notes.append(why)
                        break
                    command = re.sub(pattern, replacement, command)
                    if why not in ("the binary under test", "a scratch directory"):
                        notes.append(why)
            if command is None:
                out.append(f"echo {shlex.quote(f'- {doc}: {shown}: ' + '; '.join(notes))}")
                continue
            allowed = "0"
            for pattern, codes, why in EXITS:
                if re.search(pattern, command):
                    allowed, notes = codes, notes + [f"exit {codes.replace(' ', ', ')}: {why}"]
            index += 1
            out.append(f"run_one {index} {shlex.quote(allowed)} {shlex.quote(doc + ': ' + shown)} {shlex.quote('; '.join(notes))} {shlex.quote(command)}")
print("\n".join(out))
PY

export KVBENCH="$kvbench" WORK="$work"
mkdir -p "$work/kv"
LAST=0
run_one() {
  local n=$1 allowed=$2 shown=$3 notes=$4 command=$5 rc=0 start=$SECONDS
  echo "[$n] $shown${notes:+   ($notes)}"
  bash -c "$command" > "$work/out-$n.txt" 2> "$work/err-$n.txt" || rc=$?
  if [[ " $allowed " != *" $rc "* ]]; then
    echo "FAILED: [$n] exited $rc (expected $allowed): $command"
    tail -20 "$work/err-$n.txt"
    exit 1
  fi
  echo "    exit $rc in $((SECONDS - start)) s"
  LAST=$n
}
# shellcheck disable=SC1091
source "$work/commands.sh"

# Each sample block against what the binary printed: numbers, hashes, times and a dirty tree's
# mark masked, the machine's own line left out, the "..." lines standing for elided rows; the noise legend (~)
# appears only when a repetition was noisy.
python3 - "$work" <<'PY'
import glob, os, re, sys
work = sys.argv[1]
def shape(text):
    lines = []
    for line in text.splitlines():
        if " cores" in line:  # the machine: its CPU and cores
            continue
        line = line.replace("~", "").replace("!", "").replace(" (dirty)", "")  # marks and the build's state
        line = re.sub(r"\b[0-9a-f]{8,}\b", "H", line)
        line = re.sub(r"(?<![\w.])[+-]?\d[\d.,:T-]*(e[+-]?\d+)?Z?( ?(ms|s|min|h|KiB|MiB|GiB|B|%|x)\b|%)?\*?", "#", line)
        line = re.sub(r"\s+", " ", line).strip()
        lines.append(line)
    return lines
failures = []
for sample in glob.glob(f"{work}/sample-*.txt"):
    name = os.path.basename(sample)[len("sample-"):-len(".txt")]
    shown = shape(open(sample, encoding="utf-8").read())
    printed = shape(open(f"{work}/output-{name}.txt", encoding="utf-8").read())
    at, optional = 0, False
    for line in shown:
        optional = line.startswith("~ ") or (optional and line.startswith(("are ", "  ")))
        if line in ("...", ""):
            continue
        found = next((k for k in range(at, len(printed)) if printed[k] == line), None)
        if found is None:
            if not optional:
                failures.append(f"sample {name}: the README shows {line!r}, which the binary no longer prints (in this order)")
            continue
        at = found + 1
if failures:
    print("FAILED:\n  " + "\n  ".join(failures) + "\n  (ci/readme-samples.sh rewrites the samples from the binary)")
    sys.exit(1)
print("every README and tutorial command ran as documented; every sample has the binary's shape")
PY
