#include "ab_command.h"

#include "cli_checks.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "compare_command.h"
#include "comparison_record.h"
#include "results_reader.h"
#include "run_command.h"
#include "run_heartbeat.h"
#include "runtime/error.h"

namespace kvbench {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct ChildResult {
  int status = -1;
  std::string out;
};

// Runs argv[0] with its arguments, stdout captured, stderr to ours (its progress lines).
ChildResult run_child(const std::vector<std::string>& argv) {
  int pipe_fd[2];
  if (::pipe(pipe_fd) != 0) throw std::runtime_error("ab: pipe failed");
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("ab: fork failed");
  if (pid == 0) {
    ::dup2(pipe_fd[1], STDOUT_FILENO);
    ::close(pipe_fd[0]);
    ::close(pipe_fd[1]);
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) ::dup2(null, STDERR_FILENO);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(pipe_fd[1]);
  ChildResult r;
  char buffer[4096];
  for (ssize_t n; (n = ::read(pipe_fd[0], buffer, sizeof buffer)) > 0;) r.out.append(buffer, static_cast<std::size_t>(n));
  ::close(pipe_fd[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// A binary that can run one case at a time into a database of its own (a sim run with `sim`), and
// its version.
std::string check_binary(const std::string& path, const char* flag, bool sim) {
  if (::access(path.c_str(), X_OK) != 0) throw kv::InputError(path, flag, "not an executable file");
  const ChildResult version = run_child({path, "--version"});
  const std::string name = version.out.substr(0, version.out.find('\n'));
  if (version.status != 0 || name.rfind("kvbench ", 0) != 0) throw kv::InputError(path, flag, "not a kvbench binary (--version says no)");
  const ChildResult help = run_child({path, "run", "--help"});
  for (const char* needed : {"--json", "--filter", "--repetitions", "--db", "--sim"}) {
    if (std::string(needed) == "--sim" && !sim) continue;
    if (help.out.find(needed) == std::string::npos) {
      throw kv::InputError(path, flag, fmt::format("{} lacks `run {}`, which kvbench ab needs", name, needed));
    }
  }
  return name;
}

std::string regex_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (std::string("\\^$.|?*+()[]{}").find(ch) != std::string::npos) out += '\\';
    out += ch;
  }
  return out;
}

std::vector<std::string> case_names(const SuiteConfig& suite) {
  std::vector<std::string> names;
  for (const auto& m : suite.models) {
    for (const auto& w : suite.workloads) {
      for (const auto& p : suite.policies) {
        for (const std::string& soc : suite.socs) names.push_back(m.name + "/" + w.name + "/" + p.name + "/" + soc);
      }
    }
  }
  return names;
}

struct Side {
  std::string name;  // baseline or candidate
  bool sim = false;  // its children are sim runs
  std::string bin, version, suite, db;
  std::vector<std::int64_t> child_runs;           // in the side's database, one per child
  std::map<std::string, std::vector<std::int64_t>> runs_of;  // case -> its child runs, in repetition order
};


// One repetition of one case by one side: a child process into the side's database; `schedule`
// records the order the children ran in (side, case, start time) for the metadata.
void run_one(Side& side, const std::string& name, json& schedule) {
  schedule.push_back({{"side", side.name}, {"case", name}, {"started_at", now_utc()}});
  std::vector<std::string> argv{side.bin, "run", "--suite", side.suite, "--filter", "^" + regex_escape(name) + "$", "--repetitions", "1",
                                "--json", "--db", side.db};
  if (side.sim) argv.push_back("--sim");
  const ChildResult r = run_child(argv);
  const json doc = json::parse(r.out, nullptr, false);
  if (r.status != 0 || !doc.is_object() || !doc.contains("run_id")) {
    throw std::runtime_error(fmt::format("{} run of case {} failed (exit {}): {}", side.bin, name, r.status, r.out));
  }
  side.runs_of[name].push_back(doc["run_id"].get<std::int64_t>());
}

// The side's repetitions merged into one run of `store`.
std::int64_t merge(const Side& side, const std::vector<std::string>& names, const std::string& suite_name, const std::string& tag,
                   const json& ab_meta, ResultsStore& store) {
  ResultsStore child(side.db, Access::ReadOnly);
  const RunRecord first = get_run(child, side.runs_of.at(names.front()).front());
  RunInfo info;
  info.git_sha = first.git_sha;
  info.git_dirty = first.git_dirty;
  info.config_json = first.config_json;
  info.config_hash = first.config_hash;
  info.tags = {tag};
  json meta = json::parse(first.meta_json, nullptr, false);
  if (!meta.is_object()) meta = json::object();
  meta["suite"] = suite_name;
  meta["ab"] = ab_meta;
  info.meta_json = meta.dump();
  const std::int64_t run = store.begin_run(info);
  // On a server, other machines see the copy alive only by its beats.
  const RunHeartbeat beat(store.path(), run, kDefaultHeartbeatTimeoutS);
  for (const std::string& name : names) {
    const auto slash = [&](int i) {
      std::size_t at = 0;
      for (int k = 0; k < i; ++k) at = name.find('/', at) + 1;
      return name.substr(at, name.find('/', at) - at);
    };
    CaseInfo c{slash(0), slash(1), slash(2), slash(3), ""};
    const std::int64_t case_id = store.add_case(run, c);
    int repetition = 0;
    std::string failed;
    for (const std::int64_t child_run : side.runs_of.at(name)) {
      for (const CaseRecord& record : load_cases(child, child_run)) {
        if (record.status != "complete") {
          failed = record.status + ": " + (record.error.empty() ? record.skipped_reason : record.error);
          continue;
        }
        RepetitionRecord rep;
        rep.repetition = ++repetition;
        for (const MetricRow& row : record.metrics) {
          const Clock clock = parse_clock(row.clock).value_or(Clock::Exact);
          rep.metrics.push_back({rep.repetition, row.name, row.value, row.na_reason, row.unit, clock, row.extrapolated, row.noisy});
        }
        for (auto& [series, values] : load_series(child, child_run, name, 1)) rep.series.emplace_back(series, values);
        for (auto& [histogram, counts] : load_histograms(child, child_run, name, 1)) rep.histograms.emplace_back(histogram, counts);
        rep.events = load_events(child, child_run, name, 1);
        store.add_repetition(case_id, rep);
      }
    }
    store.finish_case(case_id, failed.empty() ? CaseStatus::Complete : CaseStatus::Failed, failed);
  }
  store.finish_run(run, RunStatus::Complete);
  return run;
}

}  // namespace

void add_ab_command(CLI::App& app, AbOptions& o) {
  o.command = app.add_subcommand("ab", "Interleaved A/B of two kvbench binaries: each case's repetitions alternate A B B A ...");
  o.command->add_option("--baseline-bin", o.baseline_bin, "the baseline kvbench binary")->required();
  o.command->add_option("--candidate-bin", o.candidate_bin, "the candidate kvbench binary")->required();
  o.command->add_option("--suite", o.suite, "suite for both (built-in name or file)")->required();
  o.command->add_option("--candidate-suite", o.candidate_suite, "a different suite for the candidate (default: --suite)");
  o.command->add_option("--repetitions", o.repetitions, "repetitions per case and side (at least 2; 1 with --sim, whose counts do not vary)")
      ->check(whole_number_in(1, 1000))
      ->capture_default_str();
  o.command->add_flag("--sim", o.sim,
                      "each side's repetitions are sim runs (kvbench run --sim): their work counted under callgrind, compared "
                      "exactly (docs/gate.md, the sim clock)");
  add_db_option(o.command, "--db", o.db, "results database for the two merged runs")->capture_default_str();
  o.command->add_option("--rules", o.rules, "gate rules JSON for the comparison (default: the built-in configs/gate.json)");
  o.command->add_option("--unreliable", o.unreliable, "rows noise left undecided: fail (exit 5) or pass")
      ->check(CLI::IsMember({"pass", "fail"}))
      ->capture_default_str();
  o.command->add_option("--inconclusive", o.inconclusive, "inconclusive rows: pass or fail (exit 4)")
      ->check(CLI::IsMember({"pass", "fail"}))
      ->capture_default_str();
}

int run_ab(const AbOptions& o) {
  Side a, b;
  a.name = "baseline";
  b.name = "candidate";
  a.bin = fs::absolute(o.baseline_bin).string();
  b.bin = fs::absolute(o.candidate_bin).string();
  if (o.repetitions < 2 && !o.sim) {
    throw kv::InputError("--repetitions", std::to_string(o.repetitions),
                         "an interleaved A/B of timings needs at least 2 repetitions a side (1 is enough with --sim: counts do not vary)");
  }
  a.sim = b.sim = o.sim;
  a.version = check_binary(a.bin, "--baseline-bin", o.sim);
  b.version = check_binary(b.bin, "--candidate-bin", o.sim);
  a.suite = o.suite;
  b.suite = o.candidate_suite.empty() ? o.suite : o.candidate_suite;
  const SuiteConfig suite_a = find_suite(a.suite), suite_b = find_suite(b.suite);
  const std::vector<std::string> names_a = case_names(suite_a), names_b = case_names(suite_b);
  std::vector<std::string> names;
  for (const std::string& n : names_a) {
    if (std::find(names_b.begin(), names_b.end(), n) != names_b.end()) names.push_back(n);
  }
  if (names.empty()) throw kv::InputError("--candidate-suite", b.suite, "has no case of the baseline suite (cases match by name)");
  const GateRules rules = load_gate_rules(o.rules).rules;
  // Children write into databases of their own, in a directory removed at the end.
  const fs::path work = fs::temp_directory_path() / fmt::format("kvbench-ab-{}", ::getpid());
  fs::create_directories(work);
  a.db = (work / "baseline.sqlite").string();
  b.db = (work / "candidate.sqlite").string();
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{work};
  const auto started = std::chrono::steady_clock::now();
  json schedule = json::array();
  for (std::size_t i = 0; i < names.size(); ++i) {
    for (int r = 0; r < o.repetitions; ++r) {
      // A B, then B A: what drifts within a pair lands on both sides alike.
      if (r % 2 == 0) {
        run_one(a, names[i], schedule);
        run_one(b, names[i], schedule);
      } else {
        run_one(b, names[i], schedule);
        run_one(a, names[i], schedule);
      }
      fmt::print(stderr, "kvbench ab: [{}/{}] {} repetition {}/{}\n", i + 1, names.size(), names[i], r + 1, o.repetitions);
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const json ab_meta{{"baseline_bin", a.bin},   {"baseline_version", a.version}, {"candidate_bin", b.bin},
                     {"candidate_version", b.version}, {"baseline_suite", a.suite}, {"candidate_suite", b.suite},
                     {"repetitions", o.repetitions}, {"sim", o.sim}, {"schedule", schedule}};
  ResultsStore store(o.db);
  const std::int64_t base_run = merge(a, names, suite_a.name, "ab:baseline", ab_meta, store);
  const std::int64_t cand_run = merge(b, names, suite_a.name, "ab:candidate", ab_meta, store);
  CompareOptions options;
  options.between_runs = false;
  options.paired = true;
  const ComparisonRecord c = comparison_record(compare_runs(store, base_run, cand_run, rules, options));
  fmt::print("interleaved A/B: {} cases x {} repetitions per side in {:.1f} s; baseline {} ({}) as run {}, candidate {} ({}) as run {}\n",
             names.size(), o.repetitions, seconds, a.bin, a.version, base_run, b.bin, b.version, cand_run);
  fmt::print("{}", comparison_table(c, false, HostTimingTest::Paired));
  if (c.failing > 0) {
    fmt::print("ab: FAIL ({} regressed)\n", c.failing);
    return kExitRunFailed;
  }
  if (c.unreliable > 0 && o.unreliable == "fail") {
    fmt::print("ab: UNRELIABLE ({} rows that noise left undecided, with no CPU-time row that settled them)\n", c.unreliable);
    return kExitUnreliable;
  }
  if (c.inconclusive > 0 && o.inconclusive == "fail") {
    fmt::print("ab: FAIL ({} inconclusive, --inconclusive=fail)\n", c.inconclusive);
    return kExitInconclusive;
  }
  fmt::print("ab: pass\n");
  return kExitOk;
}

}  // namespace kvbench
