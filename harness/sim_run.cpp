#include "sim_run.h"

#include <gnu/libc-version.h>
#include <stdlib.h>
#include <unistd.h>

#include <fmt/format.h>

#include <filesystem>

#include "build_info.h"
#include "callgrind_profile.h"
#include "callgrind_tool.h"
#include "executor.h"
#include "run_metadata.h"
#include "runtime/error.h"
#include "sim_counts.h"
#include "sim_job.h"
#include "sim_regions.h"

namespace kvbench {

namespace {

namespace fs = std::filesystem;

// A child's own directory, fresh under the system's temporary directory and removed with its
// files when done.
class ChildDir {
 public:
  ChildDir() {
    std::string pattern = (fs::temp_directory_path() / "kvbench-sim-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error(fmt::format("cannot make a directory for a callgrind child under {}", fs::temp_directory_path().string()));
    }
    path_ = pattern;
  }
  ~ChildDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  ChildDir(const ChildDir&) = delete;
  ChildDir& operator=(const ChildDir&) = delete;

  std::string file(const char* name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }
  // A link named `name` in the directory to `target`.
  void link(const char* name, const std::string& target) const {
    std::error_code ec;
    fs::create_symlink(target, file(name), ec);
    if (ec) throw std::runtime_error(fmt::format("{}: cannot link {}: {}", path_, name, ec.message()));
  }

 private:
  std::string path_;
};

// The child's whole environment: the same in every run, so that the stack it starts with (and
// with it the simulated caches' view of it) does not depend on the caller's. OpenBLAS starts no
// threads of its own: theirs would run beside the engine's, uncounted, spinning as long as the
// machine lets them, and share the simulated caches with it.
const std::vector<std::string>& child_env() {
  static const std::vector<std::string> env = {"LC_ALL=C", "PATH=/usr/local/bin:/usr/bin:/bin", "OPENBLAS_NUM_THREADS=1"};
  return env;
}

// valgrind with `tool_args`, then this binary by its link in the child's directory.
std::vector<std::string> child_argv(std::vector<std::string> tool_args, const std::vector<std::string>& program_args) {
  std::vector<std::string> argv{"valgrind"};
  argv.insert(argv.end(), tool_args.begin(), tool_args.end());
  argv.push_back(std::string("./") + kSimBinary);
  argv.insert(argv.end(), program_args.begin(), program_args.end());
  return argv;
}

std::string failure(const std::string& what, const sim::ChildExit& exit, const std::string& log) {
  const std::string how = exit.signal != 0 ? fmt::format("killed by signal {}", exit.signal) : fmt::format("exit {}", exit.code);
  const std::string tail = sim::file_tail(log, 12);
  return fmt::format("{} failed ({}){}{}", what, how, tail.empty() ? "" : ":\n", tail);
}

// The kernel paths as the engine sees them under valgrind (valgrind --tool=none).
SimProbe probe_under_valgrind(const std::string& self) {
  ChildDir dir;
  dir.link(kSimBinary, self);
  const std::string out = dir.file("probe.json");
  const sim::ChildExit exit = sim::run_child({child_argv({"--tool=none", "-q"}, {"sim-repetition", "--probe", "probe.json"}),
                                              child_env(), dir.path(), dir.file(kSimLogFile), nullptr});
  if (exit.code != 0) throw kv::InputError("--sim", "valgrind", failure("kvbench under valgrind --tool=none", exit, dir.file(kSimLogFile)));
  return read_sim_probe(out);
}

std::string suite_spec(const SuiteConfig& suite) {
  const std::string builtin = "builtin:";
  if (suite.file.rfind(builtin, 0) == 0) return suite.file.substr(builtin.size());
  return fs::absolute(suite.file).string();
}

// Host-clock series (timings of each step and request) go the way of the host figures.
void drop_host_series(RepetitionRecord& record) {
  static const std::vector<std::string> host = {"ttft_ms", "tpot_ms", "request_tpot_ms", "ttft_ms_by_request"};
  std::erase_if(record.series, [](const auto& s) { return std::find(host.begin(), host.end(), s.first) != host.end(); });
}

}  // namespace

nlohmann::json SimSetup::metadata() const {
  nlohmann::json caches = nlohmann::json::object();
  for (const sim::CacheGeometry& g : {sim::kSimI1, sim::kSimD1, sim::kSimLL}) caches[g.name] = g.text();
  std::vector<std::string> options = sim::callgrind_arguments(kSimProfileFile);
  options.pop_back();  // the output file: the child's own
  return {{"tool", "callgrind"},
          {"valgrind", valgrind},
          {"kernel_path", kernel_path},
          {"compiler", KVBENCH_COMPILER},
          {"libc", libc},
          {"engine_threads", 1},
          {"l2", "synchronous"},
          {"caches", caches},
          {"callgrind_options", options}};
}

SimSetup prepare_sim(const SuiteConfig& suite, const std::vector<PreparedCase>& cases, const std::string& models_dir) {
  if (!kv::sim::client_requests_built()) {
    throw kv::InputError("--sim", "build",
                         "this kvbench was built without Valgrind's headers (valgrind/callgrind.h): install valgrind "
                         "(ci/install-deps.sh) and build again");
  }
  const std::optional<std::string> version = sim::valgrind_version();
  if (!version) {
    throw kv::InputError("--sim", "valgrind", "valgrind is not on PATH (Debian: apt-get install valgrind; ci/install-deps.sh installs it)");
  }
  // Valgrind runs no AVX-512 on any machine: such a policy is refused before valgrind is asked.
  for (const PreparedCase& c : cases) {
    if (c.policy->cache.isa != kv::Isa::Avx512) continue;
    throw kv::InputError(suite.file, policy_path(suite, c) + "/isa",
                         "a sim run counts the engine under valgrind, which runs no AVX-512 (auto takes the path it runs)");
  }
  SimSetup setup;
  setup.valgrind = *version;
  std::error_code ec;
  setup.self = fs::read_symlink("/proc/self/exe", ec).string();
  if (ec) throw std::runtime_error("cannot find this binary (/proc/self/exe): " + ec.message());
  const SimProbe probe = probe_under_valgrind(setup.self);
  if (!probe.under_valgrind || !probe.client_requests) {
    throw kv::InputError("--sim", "valgrind", "kvbench under valgrind does not see valgrind (RUNNING_ON_VALGRIND reads 0)");
  }
  setup.kernel_path = probe.kernel_path;
  setup.kernel_paths = probe.kernel_paths;
  setup.libc = probe.libc;
  for (const PreparedCase& c : cases) {
    const kv::Isa isa = c.policy->cache.isa;
    const std::string name(kv::isa_name(isa));
    if (isa == kv::Isa::Auto || std::find(probe.kernel_paths.begin(), probe.kernel_paths.end(), name) != probe.kernel_paths.end()) continue;
    std::string runs;
    for (const std::string& p : probe.kernel_paths) runs += (runs.empty() ? "" : ", ") + p;
    throw kv::InputError(suite.file, policy_path(suite, c) + "/isa",
                         fmt::format("a sim run counts the engine under valgrind, which cannot run the {} kernels (it runs: auto, {})", name, runs));
  }
  setup.suite_spec = suite_spec(suite);
  setup.suite_file = suite.file;
  setup.socs = suite.socs;
  setup.noise_threshold = suite.noise_threshold;
  setup.config_hash = config_hash(resolved_json(suite));
  setup.models_dir = models_dir;
  return setup;
}

EngineRun run_engine_sim(const PreparedCase& c, const RepetitionContext& context, int repetition, const SimSetup& sim) {
  EngineRun run = run_engine(c, context, repetition);
  ChildDir dir;
  dir.link(kSimBinary, sim.self);
  SimJob job;
  job.suite_spec = sim.suite_spec;
  job.suite_file = sim.suite_file;
  job.socs = sim.socs;
  job.noise_threshold = sim.noise_threshold;
  job.config_hash = sim.config_hash;
  job.models_dir = sim.models_dir;
  job.model = c.info.model;
  job.workload = c.info.workload;
  job.policy = c.info.policy;
  job.l2 = context.l2_dir != nullptr && !context.l2_dir->empty();
  if (job.l2) dir.link(kSimL2Dir, fs::absolute(*context.l2_dir).string());
  if (context.capacities != nullptr) {
    job.l0_bytes = context.capacities->l0_bytes;
    job.l1_bytes = context.capacities->l1_bytes;
  }
  write_sim_job(dir.file(kSimJobFile), job);
  const sim::ChildExit exit =
      sim::run_child({child_argv(sim::callgrind_arguments(kSimProfileFile), {"sim-repetition", kSimJobFile}), child_env(), dir.path(),
                      dir.file(kSimLogFile), context.stop});
  if (exit.stopped) throw ExecutionStopped();
  if (exit.code != 0) throw std::runtime_error(failure("the callgrind run of " + c.info.name(), exit, dir.file(kSimLogFile)));
  const SimChildResult result = read_sim_result(dir.file(kSimResultFile));
  const sim::CallgrindProfile profile = sim::read_callgrind(dir.file(kSimProfileFile));
  const sim::RegionCounts counts = sim::region_counts(profile, "the callgrind output of " + c.info.name());
  const std::vector<MetricRecord> figures =
      sim::sim_metrics(counts, {repetition, result.prefill_tokens > 0, result.decode_tokens > 0, result.synthetic});
  sim::record_sim_clock(run.record, figures, kSimRunNoHostFigures);
  drop_host_series(run.record);
  return run;
}

}  // namespace kvbench
