#!/usr/bin/env bash
# Cross-builds kvbench and kvbench-micro for aarch64 Linux into OUTDIR, self-contained: the board
# needs nothing installed (docs/device-runs.md).
#
#   OUTDIR/kvbench, OUTDIR/kvbench-micro   launchers (sh): run the binaries through the loader and
#                                          libraries beside them
#   OUTDIR/bin/                            the aarch64 executables (built-in suites and SoC
#                                          profiles compiled in)
#   OUTDIR/lib/                            every shared library they load, glibc's loader and libc
#                                          included, from Debian's arm64 packages
#
# Not one static executable: Debian ships Google Benchmark (kvbench calibrate, kvbench-micro) and
# fmt for arm64 only as shared libraries. Carrying the loader and libc of the same glibc build
# makes the set independent of the board's own libc (or its absence: Android has none).
#
# KVBENCH_AARCH64_BUILD (default build-aarch64) is the build tree; ci/test.sh also builds the Arm
# kernel tests in it.
set -euo pipefail
out=${1:?usage: ci/build-aarch64.sh OUTDIR}
# OUTDIR is the caller's (relative to where it was run), and only ever one this script made: it
# replaces bin/ and lib/ there.
mkdir -p "$out"
out=$(CDPATH='' cd -- "$out" && pwd)
if [ -n "$(ls -A "$out")" ] && [ ! -e "$out/.kvbench-aarch64" ]; then
  echo "ci/build-aarch64.sh: $out is not empty and not a directory this script made; name a new one" >&2
  exit 2
fi
touch "$out/.kvbench-aarch64"
cd "$(dirname "$0")/.."
build=${KVBENCH_AARCH64_BUILD:-build-aarch64}
multiarch=/usr/lib/aarch64-linux-gnu

cmake --no-warn-unused-cli -S . -B "$build" -DCMAKE_TOOLCHAIN_FILE=ci/aarch64-toolchain.cmake -DCMAKE_BUILD_TYPE=Release \
  -DKVBENCH_ENGINE_ONLY=OFF -DKVBENCH_BUILD_TESTS=OFF -DKVBENCH_BREAK_NEON_KERNEL=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target kvbench kvbench-micro

rm -rf "$out/bin" "$out/lib"
mkdir -p "$out/bin" "$out/lib"
cp "$build/bin/kvbench" "$build/bin/kvbench-micro" "$out/bin/"
aarch64-linux-gnu-strip "$out/bin/kvbench" "$out/bin/kvbench-micro"

# The libraries: each NEEDED entry, recursively, from the arm64 multiarch directories (where
# Debian's arm64 packages put them; the loader and libc come from libc6:arm64 there too).
find_library() {
  local dir
  for dir in "$multiarch" /lib/aarch64-linux-gnu; do
    if [ -e "$dir/$1" ]; then
      echo "$dir/$1"
      return
    fi
  done
  echo "ci/build-aarch64.sh: $1 (needed by the aarch64 build) is not in $multiarch; run ci/install-deps.sh" >&2
  exit 1
}
needed() { aarch64-linux-gnu-readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
queue=("$out/bin/kvbench" "$out/bin/kvbench-micro")
while [ "${#queue[@]}" -gt 0 ]; do
  file=${queue[0]}
  queue=("${queue[@]:1}")
  names=$(needed "$file")  # on its own line: a readelf failure stops the script
  for name in $names; do
    [ -e "$out/lib/$name" ] && continue
    path=$(find_library "$name")
    cp -L "$path" "$out/lib/$name"
    queue+=("$out/lib/$name")
  done
done
# The loader (libc's NEEDED entries name it; checked, since the launchers run it).
loader=$(aarch64-linux-gnu-readelf -l "$out/bin/kvbench" | sed -n 's/.*interpreter: \(.*\)\]/\1/p')
if [ -z "$loader" ] || [ ! -e "$out/lib/$(basename "$loader")" ]; then
  echo "ci/build-aarch64.sh: the loader of bin/kvbench (${loader:-none named}) is not among the libraries copied" >&2
  exit 1
fi

for tool in kvbench kvbench-micro; do
  cat >"$out/$tool" <<EOF
#!/bin/sh
# $tool for aarch64 Linux, with the loader and libraries beside it (ci/build-aarch64.sh).
# KVBENCH_EMULATOR runs it through an emulator instead (e.g. "qemu-aarch64 -cpu max" on x86).
# Where /bin/sh is not the shell (Android: /system/bin/sh), run it as \`sh $tool\`.
here=\$(CDPATH='' cd -- "\$(dirname -- "\$0")" && pwd)
exec \${KVBENCH_EMULATOR:-} "\$here/lib/$(basename "$loader")" --library-path "\$here/lib" "\$here/bin/$tool" "\$@"
EOF
  chmod +x "$out/$tool"
done
echo "ci/build-aarch64.sh: $out: kvbench, kvbench-micro and $(ls "$out/lib" | wc -l) libraries ($(du -sh "$out" | cut -f1))"
