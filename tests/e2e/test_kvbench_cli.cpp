// End to end through the binary: the command line a team lives with. Usage errors exit 2 with
// `kvbench: <argument>: <reason>`; readers work on read-only databases and never write; an
// interrupted run keeps what it finished; logs go to stderr one line per case; the summary
// fits 120 columns with no exponent notation.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "e2e/e2e_support.h"
#include "results_store.h"
#include "test_support.h"

namespace fs = std::filesystem;
using kvtest::Output;
using kvtest::run_kvbench;
using kvtest::sql_value;
using kvtest::lines_of;

namespace {

struct Split {
  int status = -1;
  std::string out, err;
};

// stdout and stderr apart (neither is a terminal).
Split run_split(const std::string& args, const std::string& dir, const std::string& prefix = KVBENCH_BIN) {
  const std::string out = dir + "/stdout.txt", err = dir + "/stderr.txt";
  const int status = std::system((prefix + " " + args + " >" + out + " 2>" + err).c_str());
  Split s;
  s.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  s.out = kvtest::file_bytes(out);
  s.err = kvtest::file_bytes(err);
  return s;
}

void chmod_or_fail(const std::string& path, mode_t mode) { REQUIRE(::chmod(path.c_str(), mode) == 0); }

// A small finished run in `db`.
void small_run(const std::string& db, const std::string& extra = "") {
  const Output out = run_kvbench("run --suite smoke --filter multimodal-1i --repetitions 1 --db " + db + " " + extra);
  INFO(out.text);
  REQUIRE(out.status == 0);
}

}  // namespace

TEST_CASE("every usage error exits 2 naming the argument, --help and --version exit 0", "[e2e][cli]") {
  const kvtest::TempDir temp("kvbench-cli-usage");
  const std::string db = temp.path + "/results.sqlite";
  small_run(db);
  struct Bad {
    std::string args, message;
  };
  const std::vector<Bad> cases = {
      {"show abc --db " + db, "kvbench: RUN: abc: neither a run id, latest, latest:TAG, latest:suite=NAME nor a baseline name"},
      {"export 1.5 --db " + db, "kvbench: RUN: 1.5: neither a run id"},
      {"show 0 --db " + db, "kvbench: RUN: 0: not a run id (a positive integer)"},
      {"list baselines --last 2 --db " + db, "kvbench: --last: baselines: filters runs only"},
      {"show 99 --db " + db, "no run 99 in this database"},
      {"run --repetitions 0", "kvbench: --repetitions: 0 is not in 1..1000"},
      {"run --repetitions abc", "kvbench: --repetitions: 'abc' is not a whole number"},
      {"run --suite smoke --tag a,b --db " + temp.path + "/x.sqlite", "kvbench: --tag: must not contain ',': stored tags are separated by commas"},
      {"run --suite smoke --tag '' --db " + temp.path + "/x.sqlite", "kvbench: --tag: must not be empty"},
      {"run --repetitions 3x", "kvbench: --repetitions: '3x' is not a whole number"},
      {"report --history -1 --db " + db, "kvbench: --history: -1 is not in 1..10000"},
      {"calibrate --min-seconds fast --out " + temp.path + "/host.json", "kvbench: --min-seconds: 'fast' is not a number"},
      {"export 1 --format xml --db " + db, "kvbench: --format: xml not in {json,csv}"},
      {"list runs --bogus", "kvbench: --bogus: unexpected argument to `kvbench list`"},
      {"list runs --status done --db " + db, "kvbench: --status: done not in"},
      {"list runs --last 0 --db " + db, "kvbench: --last: 0 is not a positive whole number (1 or more)"},
      {"list runs --last -1 --db " + db, "kvbench: --last: -1 is not a positive whole number (1 or more)"},
      {"list runs --last 1.5 --db " + db, "kvbench: --last: '1.5' is not a whole number"},
      {"list runs --last 99999999999 --db " + db, "kvbench: --last: 99999999999 is too large (at most 2147483647)"},
      {"trend --metric ttft_ms --last -1 --db " + db, "kvbench: --last: -1 is not a positive whole number (1 or more)"},
      {"list", "kvbench: list: say what to list: runs, baselines or acks"},
      {"list --db " + db, "kvbench: list: say what to list: runs, baselines or acks"},
      {"list suites --db " + db, "kvbench: what: suites not in {runs,baselines,acks}"},
      {"foo bar", "kvbench: foo: unknown subcommand (one of: "},
      {"show 1 2", "kvbench: 2: unexpected argument to `kvbench show`"},
      {"show 1 --metrics ttft_ms,nope --db " + db, "kvbench: --metrics: nope: not a metric"},
      {"run --suite smoke --l2-dir " + temp.path + "/nowhere --db " + temp.path + "/x.sqlite", "/nowhere: --l2-dir: does not exist"},
      {"run --suite smoke --l2-dir " + db + " --db " + temp.path + "/x.sqlite", "--l2-dir: is not a directory"},
      {"run --filter '(' --db " + temp.path + "/x.sqlite", "not a regular expression"},
  };
  for (const Bad& bad : cases) {
    const Output out = run_kvbench(bad.args);
    INFO(bad.args << "\n" << out.text);
    CHECK(out.status == 2);
    CHECK(out.text.find(bad.message) != std::string::npos);
    CHECK(out.text.rfind("kvbench: ", 0) == 0);
    CHECK_FALSE(std::regex_search(out.text, std::regex("[0-9]{20}")));  // no bound printed as a 300-digit double
  }
  CHECK_FALSE(fs::exists(temp.path + "/x.sqlite"));
  CHECK(run_kvbench("--help").status == 0);
  CHECK(run_kvbench("show --help").status == 0);
  CHECK(run_kvbench("--version").status == 0);
}

TEST_CASE("kvbench score validates its flags like a suite", "[e2e][cli]") {
  const kvtest::TempDir temp("kvbench-cli-score");
  const std::string text = temp.path + "/text.txt";
  // Longer than the 64-token window the flags below score with (a shorter text is refused).
  kvtest::write_file(text, "Once upon a time there was a little dog. It liked to run in the park with its friends. "
                           "One day the dog saw a big red ball under a tree. It ran to the ball and played with it all day. "
                           "When the sun went down, the dog went home to sleep.\n");
  const std::string model = "--model " + kvtest::model_file("stories260K.bin") + " --tokenizer " + kvtest::model_file("tok512.bin") +
                            " --text " + text;
  struct Bad {
    std::string flags, message;
  };
  for (const Bad& bad : std::vector<Bad>{
           {"--window 100000", "kvbench: --window: 100000: is larger than the context of"},
           {"--budget 0.5", "kvbench: --budget: 0.5: selector full takes no budget"},
           {"--selector window --budget-pages 4", "kvbench: --budget-pages: 4: selector window takes no budget"},
           {"--selector hybrid", "kvbench: --selector: hybrid: needs a budget: --budget"},
           {"--selector quest --budget 0.5 --budget-pages 3", "give one of --budget and --budget-pages"},
           {"--selector nonsense", "nonsense"},
           {"--v-group 12", "kvbench: --v-group: 12: must be a multiple of 8 that divides head_dim 8"},
       }) {
    const Output out = run_kvbench("score " + model + " " + bad.flags);
    INFO(bad.flags << "\n" << out.text);
    CHECK(out.status == 2);
    CHECK(out.text.find(bad.message) != std::string::npos);
  }
  const Output ok = run_kvbench("score " + model + " --window 64 --selector hybrid --budget-pages 2 --json");
  INFO(ok.text);
  CHECK(ok.status == 0);
  CHECK(ok.text.find("\"budget_pages\": 2") != std::string::npos);
  // The window defaults to the model's context: a 128-position GGUF scores without --window.
  const Output gguf = run_kvbench("score --model " + kvtest::model_file("stories260K.gguf") + " --text " +
                                  kvtest::model_file("tinystories-sample.txt") + " --max-windows 1 --json");
  INFO(gguf.text);
  CHECK(gguf.status == 0);
  CHECK(gguf.text.find("\"predictions\": 127,") != std::string::npos);
  CHECK(run_kvbench("score " + model + " --window 0").status == 2);
}

TEST_CASE("list, show and export read a 0444 database and one in a read-only directory, and never write it", "[e2e][cli]") {
  const kvtest::TempDir temp("kvbench-cli-readonly");
  chmod_or_fail(temp.path, 0755);
  const std::string dir = temp.path + "/archive";
  fs::create_directory(dir);
  const std::string db = dir + "/results.sqlite";
  small_run(db, "--tag archived");
  // An unprivileged copy of the binary: root ignores permission bits.
  const std::string bin = temp.path + "/kvbench";
  fs::copy_file(KVBENCH_BIN, bin);
  chmod_or_fail(bin, 0755);
  const std::string prefix = ::geteuid() == 0 ? "setpriv --reuid=65534 --regid=65534 --clear-groups " + bin : bin;
  const std::string before = kvtest::file_bytes(db);
  const auto read_all = [&](const std::string& what) {
    for (const std::string& args : {"list runs --tag archived --db " + db, "show 1 --db " + db, "export 1 --format csv --db " + db,
                                    "show 1 --json --db " + db}) {
      const Split s = run_split(args, temp.path, prefix);
      INFO(what << ": " << args << "\n" << s.out << s.err);
      CHECK(s.status == 0);
      CHECK(s.err.empty());
      CHECK(s.out.find("attempt to write") == std::string::npos);
      CHECK((s.out.find("complete") != std::string::npos || s.out.find("multimodal-1i") != std::string::npos));
    }
  };
  chmod_or_fail(dir, 0755);
  chmod_or_fail(db, 0444);
  read_all("0444 file");
  chmod_or_fail(dir, 0555);
  read_all("read-only directory");
  // A writer is refused with the reason, not a crash.
  const Split write = run_split("run --suite smoke --filter multimodal-1i/f16 --repetitions 1 --db " + db, temp.path, prefix);
  INFO(write.err);
  CHECK(write.status == 2);
  CHECK(write.err.find(db) != std::string::npos);
  chmod_or_fail(dir, 0755);
  chmod_or_fail(db, 0644);
  // An immutable file (chattr +i: not even root may write it), where the filesystem has them.
  if (std::system(("chattr +i " + db + " 2>/dev/null").c_str()) == 0) {
    for (const std::string& args : {"list runs --db " + db, "show 1 --db " + db, "export 1 --db " + db}) {
      const Split s = run_split(args, temp.path);
      INFO("immutable: " << args << "\n" << s.out << s.err);
      CHECK(s.status == 0);
      CHECK(s.err.empty());
    }
    const Split refused = run_split("run --suite smoke --filter multimodal-1i/f16 --repetitions 1 --db " + db, temp.path);
    CHECK(refused.status == 2);
    CHECK(std::system(("chattr -i " + db).c_str()) == 0);
  } else {
    WARN("chattr +i is not available here: the immutable-file case is not exercised");
  }
  CHECK(kvtest::file_bytes(db) == before);
}

TEST_CASE("an empty or foreign file is not a kvbench database and stays untouched", "[e2e][cli]") {
  const kvtest::TempDir temp("kvbench-cli-empty");
  const std::string empty = temp.path + "/empty.sqlite";
  kvtest::write_file(empty, "");
  const std::string text = temp.path + "/notes.sqlite";
  kvtest::write_file(text, "meeting notes, not a database");
  for (const std::string& file : {empty, text}) {
    const std::string before = kvtest::file_bytes(file);
    for (const std::string& args : {"list runs --db " + file, "show 1 --db " + file, "export 1 --db " + file}) {
      const Output out = run_kvbench(args);
      INFO(args << "\n" << out.text);
      CHECK(out.status == 2);
      CHECK(out.text.find(file) != std::string::npos);
      CHECK((out.text.find("not a kvbench database") != std::string::npos || out.text.find("not a database") != std::string::npos));
    }
    CHECK(kvtest::file_bytes(file) == before);
  }
  const Output missing = run_kvbench("list runs --db " + temp.path + "/missing.sqlite");
  CHECK(missing.status == 2);
  CHECK(missing.text.find("no such database") != std::string::npos);
  CHECK_FALSE(fs::exists(temp.path + "/missing.sqlite"));
}

TEST_CASE("a v2 database is read as it is and migrated by the next run, its runs intact", "[e2e][cli]") {
  const kvtest::TempDir temp("kvbench-cli-v2");
  const std::string db = temp.path + "/results.sqlite";
  fs::copy_file(std::string(KVBENCH_SOURCE_DIR) + "/tests/data/results-v2.sqlite", db);
  const std::string metrics = sql_value(db, "SELECT count(*) FROM metric_values");
  Output out = run_kvbench("list runs --json --db " + db);
  INFO(out.text);
  REQUIRE(out.status == 0);
  CHECK(nlohmann::json::parse(out.text).size() == 2);
  CHECK(sql_value(db, "PRAGMA user_version") == "2");
  small_run(db);
  CHECK(sql_value(db, "PRAGMA user_version") == std::to_string(kvbench::kSchemaVersion));
  CHECK(sql_value(db, "SELECT count(*) FROM runs") == "3");
  CHECK(sql_value(db, "SELECT count(*) FROM metric_values WHERE run_id <= 2") == metrics);
  CHECK(sql_value(db, "SELECT group_concat(status) FROM runs") == "complete,complete,complete");
  CHECK(sql_value(db, "PRAGMA integrity_check") == "ok");
}

TEST_CASE("list runs filters by status, suite and tag, keeps the newest N, and prints JSON", "[e2e][cli]") {
  const kvtest::TempDir temp("kvbench-cli-list");
  const std::string db = temp.path + "/results.sqlite";
  small_run(db, "--tag a");
  small_run(db, "--tag a --tag b");
  small_run(db, "--tag b");
  const auto ids = [&](const std::string& flags) {
    const Output out = run_kvbench("list runs --json --db " + db + " " + flags);
    INFO(out.text);
    REQUIRE(out.status == 0);
    std::vector<int> found;
    for (const auto& run : nlohmann::json::parse(out.text)) found.push_back(run["id"].get<int>());
    return found;
  };
  CHECK(ids("") == std::vector<int>{1, 2, 3});
  CHECK(ids("--tag a") == std::vector<int>{1, 2});
  CHECK(ids("--tag a --tag b") == std::vector<int>{2});
  CHECK(ids("--last 2") == std::vector<int>{2, 3});
  CHECK(ids("--tag b --last 1") == std::vector<int>{3});
  CHECK(ids("--status complete --suite smoke") == std::vector<int>{1, 2, 3});
  CHECK(ids("--status interrupted").empty());
  CHECK(ids("--suite nightly").empty());
  const Output table = run_kvbench("list runs --db " + db);
  CHECK(table.text.find("a,b") != std::string::npos);
}

TEST_CASE("a piped run logs its plan and a line per finished repetition and case on stderr, stdout is the JSON object alone", "[e2e][whole-runs][cli]") {
  const kvtest::TempDir temp("kvbench-cli-logs");
  const std::string db = temp.path + "/results.sqlite";
  const Split s = run_split("run --suite smoke --filter multimodal-1i --repetitions 1 --json --db " + db, temp.path);
  INFO(s.out << s.err);
  REQUIRE(s.status == 0);
  const auto doc = nlohmann::json::parse(s.out);  // nothing else on stdout
  CHECK(doc["status"] == "complete");
  CHECK(doc["stored_repetitions"] == 2);
  const auto lines = lines_of(s.err);
  REQUIRE(lines.size() == 5);
  CHECK(lines[0] == "kvbench: 2 cases: 2 engine runs planned");
  const std::regex repetition(R"(kvbench: \[[12]/2\] syn-7b/multimodal-1i/\S+/host repetition 1/1 done in [0-9.]+ (us|ms|s|min) \(ETA [^)]+\))");
  const std::regex finished(R"(kvbench: \[[12]/2\] syn-7b/multimodal-1i/\S+/host complete in [0-9.]+ (us|ms|s|min) \(ETA [^)]+\))");
  for (std::size_t i = 1; i < lines.size(); ++i) {
    INFO(lines[i]);
    CHECK(std::regex_match(lines[i], i % 2 == 1 ? repetition : finished));
    CHECK(lines[i].find('\r') == std::string::npos);
  }
  // Without --json, stdout is the summary: no exponent, 120 columns.
  // No heartbeat: a slow build (sanitizers) would add lines inside long repetitions.
  const Split summary = run_split("run --suite smoke --repetitions 1 --heartbeat 0 --db " + db, temp.path);
  INFO(summary.out);
  REQUIRE(summary.status == 0);
  CHECK(summary.out.find("run 2 [complete] suite smoke") == 0);
  for (const std::string& l : lines_of(summary.out)) {
    INFO(l);
    CHECK(l.size() <= 120);
    // Exponent notation always carries its sign (8.56e+05); a git sha may hold "1e9".
    CHECK_FALSE(std::regex_search(l, std::regex("[0-9]e[-+][0-9]")));
  }
  CHECK(lines_of(summary.err).size() == 1 + 8 + 8);  // the plan, each repetition, each case
}

TEST_CASE("SIGINT mid-run keeps the finished repetitions, marks the run interrupted and removes only its own L2 files",
          "[e2e][cli]") {
  const kvtest::TempDir temp("kvbench-cli-sigint");
  const std::string l2 = temp.path + "/l2";
  fs::create_directory(l2);
  const std::string db = temp.path + "/results.sqlite";
  const std::string other_db = temp.path + "/other.sqlite";
  const auto spawn = [&](const std::string& database, const std::string& log, const char* repetitions) {
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
      ::execl(KVBENCH_BIN, KVBENCH_BIN, "run", "--suite", "smoke", "--repetitions", repetitions, "--filter", "tight", "--l2-dir", l2.c_str(),
              "--db", database.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    return child;
  };
  const auto stored = [&](const std::string& database) {
    const std::string n = fs::exists(database) ? kvtest::sql_value_if_ready(database, "SELECT count(*) FROM metrics") : "";
    return !n.empty() && n != "0";
  };
  const auto wait_for = [&](const auto& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
    while (!done() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return done();
  };
  // The concurrent run: its L2 subdirectory must outlive the interrupted one.
  const pid_t other = spawn(other_db, temp.path + "/other.log", "50");  // still running when the first one stops
  const std::string other_prefix = "kvbench-run-" + std::to_string(other) + "-";
  const auto other_dir_exists = [&] {
    for (const auto& e : fs::directory_iterator(l2)) {
      if (e.path().filename().string().rfind(other_prefix, 0) == 0) return true;
    }
    return false;
  };
  REQUIRE(wait_for(other_dir_exists));
  const pid_t child = spawn(db, temp.path + "/run.log", "3");
  REQUIRE(wait_for([&] { return stored(db); }));
  ::kill(child, SIGINT);
  int status = 0;
  ::waitpid(child, &status, 0);
  const std::string log = kvtest::file_bytes(temp.path + "/run.log");
  INFO(log);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  CHECK(log.find("interrupted by SIGINT: run 1 is marked interrupted") != std::string::npos);
  CHECK(sql_value(db, "SELECT status FROM runs") == "interrupted");
  CHECK(std::stoi(sql_value(db, "SELECT count(*) FROM cases WHERE status = 'failed' AND error = 'interrupted'")) == 1);
  CHECK(sql_value(db, "SELECT count(*) FROM cases WHERE status = 'running'") == "0");
  // Every stored repetition is whole: the same metric count for each.
  CHECK(sql_value(db, "SELECT count(DISTINCT n) FROM (SELECT count(*) AS n FROM metrics GROUP BY case_id, repetition)") == "1");
  CHECK(std::stoi(sql_value(db, "SELECT count(*) FROM metrics")) > 0);
  CHECK(sql_value(db, "PRAGMA integrity_check") == "ok");
  for (const auto& e : fs::directory_iterator(l2)) {
    INFO(e.path());
    CHECK(e.path().filename().string().rfind("kvbench-run-" + std::to_string(child) + "-", 0) != 0);
  }
  CHECK(other_dir_exists());
  // show says so in plain words, with the interrupted case's stored repetitions.
  const Output shown = run_kvbench("show 1 --db " + db);
  INFO(shown.text);
  CHECK(shown.status == 0);
  CHECK(shown.text.find("run 1 [interrupted]") != std::string::npos);
  CHECK(shown.text.find("[interrupted]\n") != std::string::npos);
  CHECK(shown.text.find(": the run was stopped during this case;") != std::string::npos);
  CHECK(shown.text.find("the run was interrupted (SIGINT or SIGTERM)") != std::string::npos);
  // The concurrent run, stopped the same way, cleans up after itself too.
  ::kill(other, SIGTERM);
  ::waitpid(other, &status, 0);
  CHECK(WEXITSTATUS(status) == 130);
  CHECK(fs::is_empty(l2));
}
