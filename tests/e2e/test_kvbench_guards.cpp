// What a bad input must not get through, driven through the binary: thread counts that would
// starve the machine, a text too short to score, a killed run's L2 files, a read-only database
// that `run --check` would pass, tier sizes larger than the memory they stand for, and a degraded
// run read as a success.
#include <catch2/catch.hpp>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "e2e/e2e_support.h"
#include "test_support.h"

namespace fs = std::filesystem;
using kvtest::Output;
using kvtest::run_kvbench;
using kvtest::sql_value;

namespace {

std::string model_args(const std::string& text) {
  return "--model " + kvtest::model_file("stories260K.bin") + " --tokenizer " + kvtest::model_file("tok512.bin") + " --text " + text;
}

// The run directories (kvbench-run-*) under an L2 base.
std::vector<std::string> run_dirs(const std::string& base) {
  std::vector<std::string> dirs;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(base, ec)) {
    if (e.path().filename().string().rfind("kvbench-run-", 0) == 0) dirs.push_back(e.path().string());
  }
  return dirs;
}

// Starts `kvbench run ...` (one offloading case, many repetitions), waits until its L2 run
// directory exists, kills it with SIGKILL and returns that directory.
std::string killed_run_dir(const std::string& db, const std::string& l2) {
  const std::size_t before = run_dirs(l2).size();
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (std::freopen("/dev/null", "w", stdout) == nullptr || std::freopen("/dev/null", "w", stderr) == nullptr) ::_exit(127);
    ::execl(KVBENCH_BIN, KVBENCH_BIN, "run", "--suite", "smoke", "--filter", "rag-2k/q4-hybrid-tight", "--repetitions", "50", "--db",
            db.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (run_dirs(l2).size() == before && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // inside its first repetition
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(WIFSIGNALED(status));
  const std::string dir = "kvbench-run-" + std::to_string(child) + "-";
  for (const std::string& d : run_dirs(l2)) {
    if (fs::path(d).filename().string().rfind(dir, 0) == 0) return d;
  }
  FAIL("the killed run left no L2 directory under " << l2);
  return "";
}

}  // namespace

TEST_CASE("a thread count past twice the cores is refused before a thread starts: --threads, the suite field, the override", "[e2e][guards]") {
  const kvtest::TempDir dir("kvbench-e2e-threads");
  const std::string text = kvtest::model_file("tinystories-sample.txt");
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  // Under a process limit of 64 (an unprivileged user: root ignores RLIMIT_NPROC), starting the
  // refused threads would fail with an internal error instead of exit 2.
  const std::string limited = ::geteuid() == 0 ? "setpriv --reuid=65534 --regid=65534 --clear-groups prlimit --nproc=64 " : "prlimit --nproc=64 ";
  const std::string bin = dir.path + "/kvbench";
  fs::copy_file(KVBENCH_BIN, bin);
  fs::permissions(bin, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  fs::permissions(dir.path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  const std::string out = dir.path + "/out.txt";
  struct Bad {
    std::string threads, env, message;
  };
  for (const Bad& bad : std::vector<Bad>{
           {"100000", "", "kvbench: --threads: 100000 is not in 0..4096"},
           {std::to_string(2 * cores + 1), "",
            std::to_string(2 * cores + 1) + " threads is more than twice this machine's " + std::to_string(cores) + " hardware threads"},
           {"3", "KVBENCH_MAX_THREADS=2 ", "3 threads is more than KVBENCH_MAX_THREADS (2)"},
           {"1", "KVBENCH_MAX_THREADS=lots ", "KVBENCH_MAX_THREADS: 'lots' is not a whole number in 1..4096"},
           {"-1", "", "--threads"},
       }) {
    const auto start = std::chrono::steady_clock::now();
    const int status = std::system((bad.env + limited + bin + " score " + model_args(text) + " --threads " + bad.threads + " >" + out + " 2>&1").c_str());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string said = kvtest::read_file(out);
    INFO(bad.env << "--threads " << bad.threads << "\n" << said);
    CHECK((WIFEXITED(status) ? WEXITSTATUS(status) : -1) == 2);
    CHECK(said.find(bad.message) != std::string::npos);
    CHECK(seconds < 30.0);  // refused at once, never after a scoring run
  }
  // The override allows what it names.
  const Output allowed = run_kvbench("score " + model_args(text) + " --window 64 --max-windows 1 --threads " + std::to_string(2 * cores + 1));
  CHECK(allowed.status == 2);
  {
    const kvtest::ScopedEnv env("KVBENCH_MAX_THREADS", std::to_string(2 * cores + 1));
    const Output ok = run_kvbench("score " + model_args(text) + " --window 64 --max-windows 1 --threads " + std::to_string(2 * cores + 1));
    INFO(ok.text);
    CHECK(ok.status == 0);
    CHECK(ok.text.find("on " + std::to_string(2 * cores + 1) + " threads") != std::string::npos);
  }
  // The suite's field, before anything is written.
  const std::string suite = dir.path + "/threads.json";
  kvtest::write_file(suite, R"({"name": "t", "repetitions": 1, "warmup": 0,
    "models": [{"name": "m", "backend": "synthetic", "preset": "qwen-0.5b-gqa", "sample_layers": 1}],
    "workloads": [{"name": "rag-1k", "kind": "rag", "context_tokens": 1024, "gen_tokens": 4}],
    "policies": [{"name": "p", "k": "q4", "v": "q4", "threads": )" + std::to_string(2 * cores + 1) + "}]}");
  const std::string db = dir.path + "/results.sqlite";
  for (const char* flags : {" --check", ""}) {
    const Output refused = run_kvbench("run --suite " + suite + " --db " + db + flags);
    INFO(refused.text);
    CHECK(refused.status == 2);
    CHECK(refused.text.find(suite + ": /policies/0/threads: " + std::to_string(2 * cores + 1) + " threads is more than twice") !=
          std::string::npos);
    CHECK_FALSE(fs::exists(db));
  }
}

TEST_CASE("score refuses an empty text and one shorter than its window", "[e2e][guards]") {
  const kvtest::TempDir dir("kvbench-e2e-score-text");
  const std::string empty = dir.path + "/empty.txt", blank = dir.path + "/blank.txt", shorter = dir.path + "/short.txt";
  kvtest::write_file(empty, "");
  kvtest::write_file(blank, " \n\n");
  kvtest::write_file(shorter, "Once upon a time there was a little dog.\n");
  struct Bad {
    std::string text, flags, message;
  };
  for (const Bad& bad : std::vector<Bad>{
           {empty, "", "kvbench: --text: " + empty + ": is empty (0 bytes): there is nothing to score"},
           {blank, "", "kvbench: --text: " + blank + ": is empty (3 bytes, white space only)"},
           {shorter, "--window 64", "fewer than one scoring window of 64 tokens; give a longer text or a smaller --window"},
           {shorter, "", "fewer than one scoring window of 512 tokens"},
       }) {
    const Output out = run_kvbench("score " + model_args(bad.text) + " " + bad.flags);
    INFO(bad.text << " " << bad.flags << "\n" << out.text);
    CHECK(out.status == 2);
    CHECK(out.text.find(bad.message) != std::string::npos);
    CHECK(out.text.find("ppl") == std::string::npos);
  }
  // A window the text fills scores.
  const Output ok = run_kvbench("score " + model_args(shorter) + " --window 8 --json");
  INFO(ok.text);
  CHECK(ok.status == 0);
}

TEST_CASE("a SIGKILLed run's L2 directory is removed by the next offloading run, and by prune", "[e2e][guards]") {
  const kvtest::TempDir dir("kvbench-e2e-killed-l2");
  const std::string db = dir.path + "/results.sqlite";
  const std::string l2 = dir.path + "/l2";
  const std::string first = killed_run_dir(db, l2);
  CHECK(fs::exists(first));
  // A run beside it that is alive keeps its own directory: only dead runs' go. The next run that
  // offloads removes the killed one's and its own.
  const Output next = run_kvbench("run --suite smoke --filter multimodal-1i/q4-hybrid-tight --repetitions 1 --db " + db);
  INFO(next.text);
  CHECK(next.status == 0);
  CHECK_FALSE(fs::exists(first));
  CHECK(run_dirs(l2).empty());
  // prune removes them too.
  const std::string second = killed_run_dir(db, l2);
  CHECK(fs::exists(second));
  const Output pruned = run_kvbench("prune --older-than 0 --db " + db);
  INFO(pruned.text);
  CHECK(pruned.status == 0);
  CHECK(pruned.text.find("removed 1 L2 directory of killed runs under " + l2) != std::string::npos);
  CHECK_FALSE(fs::exists(second));
}

TEST_CASE("a read-only database: run --check refuses it as run does, and writers say read-only", "[e2e][guards]") {
  const kvtest::TempDir dir("kvbench-e2e-readonly-writers");
  fs::permissions(dir.path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  const std::string db = dir.path + "/results.sqlite";
  REQUIRE(run_kvbench("run --suite smoke --filter multimodal-1i --repetitions 1 --db " + db).status == 0);
  REQUIRE(run_kvbench("run --suite smoke --filter multimodal-1i --repetitions 1 --db " + db).status == 0);
  fs::permissions(db, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  // Root writes a 0444 file: the writers run as an unprivileged user.
  const std::string bin = dir.path + "/kvbench";
  fs::copy_file(KVBENCH_BIN, bin);
  fs::permissions(bin, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  const std::string prefix = ::geteuid() == 0 ? "setpriv --reuid=65534 --regid=65534 --clear-groups " + bin : bin;
  const std::string before = kvtest::read_file(db);
  const std::string out = dir.path + "/out.txt";
  for (const std::string& args : {"run --suite smoke --check --db " + db, "run --suite smoke --filter multimodal-1i --db " + db,
                                  "baseline set main 1 --reason r --db " + db, "ack --run 2 --baseline 1 --metric decode_tps --reason r --db " + db,
                                  "gate --baseline 1 --candidate 2 --db " + db}) {
    const int status = std::system((prefix + " " + args + " >" + out + " 2>&1").c_str());
    const std::string said = kvtest::read_file(out);
    INFO(args << "\n" << said);
    CHECK((WIFEXITED(status) ? WEXITSTATUS(status) : -1) == 2);
    CHECK(said.find("kvbench: " + db + ": --db: cannot write: it is read-only for this user") != std::string::npos);
    CHECK(said.find("give a writable copy or make it writable") != std::string::npos);
    CHECK(said.find("unable to open") == std::string::npos);
  }
  CHECK(kvtest::read_file(db) == before);
}

TEST_CASE("an L1 cap or L0 arena larger than the memory of the machine or SoC is refused, naming the limit", "[e2e][guards]") {
  const kvtest::TempDir dir("kvbench-e2e-huge-tiers");
  const std::string db = dir.path + "/results.sqlite";
  const auto suite = [&](const std::string& memory, const std::string& socs) {
    const std::string path = dir.path + "/tiers.json";
    kvtest::write_file(path, R"({"name": "t", "repetitions": 1, "warmup": 0, "socs": )" + socs + R"(,
      "models": [{"name": "m", "backend": "synthetic", "preset": "qwen-0.5b-gqa", "sample_layers": 1}],
      "workloads": [{"name": "rag-1k", "kind": "rag", "context_tokens": 1024, "gen_tokens": 4}],
      "policies": [{"name": "p", "k": "q4", "v": "q4", "memory": )" + memory + "}]}");
    return path;
  };
  struct Bad {
    std::string memory, socs, message;
  };
  for (const Bad& bad : std::vector<Bad>{
           {R"({"l1_bytes": "99999999GiB"})", R"(["host"])", "/policies/0/memory/l1_bytes: "},
           {R"({"l1_bytes": "99999999GiB"})", R"(["host"])", " bytes) is more than this machine's physical memory ("},
           {R"({"l1_bytes": "12GiB"})", R"(["raspberry-pi-5"])", "/policies/0/memory/l1_bytes: 12.0 GiB (12884901888 bytes) is more than the installed DRAM of SoC 'raspberry-pi-5' ("},
           {R"({"l0_bytes": "9000GiB"})", R"(["host"])", "/policies/0/memory/l0_bytes: "},
       }) {
    const std::string path = suite(bad.memory, bad.socs);
    for (const char* flags : {" --check", ""}) {
      const Output out = run_kvbench("run --suite " + path + " --db " + db + flags);
      INFO(bad.memory << " " << bad.socs << flags << "\n" << out.text);
      CHECK(out.status == 2);
      CHECK(out.text.find(bad.message) != std::string::npos);
      CHECK_FALSE(fs::exists(db));
      CHECK_FALSE(fs::exists(dir.path + "/l2"));
    }
  }
  // Within the machine: it runs.
  CHECK(run_kvbench("run --check --suite " + suite(R"({"l1_bytes": "64MiB"})", R"(["host"])") + " --db " + db).status == 0);
}

TEST_CASE("run --fail-on-degraded exits 7 when a case ran degraded, 0 otherwise", "[e2e][guards]") {
  const kvtest::TempDir dir("kvbench-e2e-fail-on-degraded");
  const std::string db = dir.path + "/results.sqlite";
  const std::string suite = dir.path + "/degraded.json";
  // Sinks and window only, allowed: the case runs and is marked degraded.
  kvtest::write_file(suite, R"({"name": "d", "repetitions": 1, "warmup": 0,
    "models": [{"name": "m", "backend": "synthetic", "preset": "qwen-0.5b-gqa", "sample_layers": 1}],
    "workloads": [{"name": "rag-2k", "kind": "rag", "context_tokens": 2048, "gen_tokens": 4}],
    "policies": [{"name": "q4-hybrid", "k": "q4", "v": "q4", "page_tokens": 64,
                  "sparse": {"selector": "hybrid", "sinks": 4, "window": 256, "budget_pages": 2, "allow_pinned_only": true}}]})");
  const Output plain = run_kvbench("run --suite " + suite + " --db " + db);
  INFO(plain.text);
  CHECK(plain.status == 0);
  const Output failing = run_kvbench("run --suite " + suite + " --db " + db + " --fail-on-degraded");
  INFO(failing.text);
  CHECK(failing.status == 7);
  CHECK(failing.text.find("kvbench: run 2: 1 case ran degraded (`kvbench show 2 --db " + db + "` says what each gave up); exit 7 (--fail-on-degraded)") !=
        std::string::npos);
  CHECK(sql_value(db, "SELECT status FROM runs WHERE id = 2") == "complete");
  // A run that did not degrade passes with the flag.
  const Output clean = run_kvbench("run --suite smoke --filter multimodal-1i/f16 --repetitions 1 --db " + db + " --fail-on-degraded");
  INFO(clean.text);
  CHECK(clean.status == 0);
}
