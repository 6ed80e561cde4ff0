#!/usr/bin/env bash
# A database on a filesystem that fills up mid-run: a real 4 MiB tmpfs, nearly filled before the
# run. kvbench must exit 2 naming the database and the reason, and the run must read `failed`
# (never `aborted`: the process did not die). Mounting needs root and a kernel that lets this
# process mount; where it cannot, the test is skipped (exit 77, CTest's SKIP_RETURN_CODE) and
# says why.
set -euo pipefail

kvbench=$1
work=$(mktemp -d)
mnt=$work/full
mkdir -p "$mnt" "$work/l2"
cleanup() {
  umount "$mnt" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
if [ "$(id -u)" != 0 ] || ! mount -t tmpfs -o size=4m tmpfs "$mnt" 2>"$work/mount.err"; then
  echo "SKIPPED: cannot mount a small tmpfs here (needs root and mount rights): $(cat "$work/mount.err" 2>/dev/null)"
  exit 77
fi
# About 600 KiB left: a smoke run's database takes about 1.6 MiB, so it fills after a few cases.
dd if=/dev/zero of="$mnt/filler" bs=1k count=3500 status=none
status=0
"$kvbench" run --suite smoke --repetitions 1 --db "$mnt/results.sqlite" --l2-dir "$work/l2" > "$work/out" 2>&1 || status=$?
cat "$work/out"
if [ "$status" != 2 ]; then echo "FAILED: exit $status, expected 2"; exit 1; fi
if ! grep -q "^kvbench: $mnt/results.sqlite: --db: cannot write: database or disk is full" "$work/out"; then
  echo "FAILED: the message does not name the database and the full filesystem"
  exit 1
fi
if grep -q "internal error" "$work/out"; then echo "FAILED: an internal error"; exit 1; fi
# Read after freeing the space: what the run's row says.
rm -f "$mnt/filler"
listed=$("$kvbench" list runs --db "$mnt/results.sqlite")
echo "$listed"
if ! echo "$listed" | grep -Eq "^ +1 +failed "; then echo "FAILED: the run does not read failed"; exit 1; fi
# The case in flight names the database as its reason.
shown=$("$kvbench" show 1 --db "$mnt/results.sqlite" | tr -s ' \n' ' ')
echo "$shown"
if ! echo "$shown" | grep -Eq "failed [^ ]+: the results database could not be written: cannot write: database or disk is full"; then
  echo "FAILED: the failed case does not say the database could not be written"
  exit 1
fi
echo "PASSED"
