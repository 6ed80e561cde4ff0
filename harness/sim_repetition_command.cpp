#include "sim_repetition_command.h"

#include <gnu/libc-version.h>

#include <algorithm>
#include <exception>
#include <thread>

#include "case_plan.h"
#include "case_preparation.h"
#include "engine_run.h"
#include "run_command.h"
#include "run_metadata.h"
#include "runtime/error.h"
#include "runtime/isa.h"
#include "sim_job.h"
#include "sim_regions.h"

namespace kvbench {

namespace {

SimProbe probe() {
  SimProbe p;
  p.kernel_path = kv::isa_name(kv::best_isa());
  for (kv::Isa isa : kv::supported_isas()) p.kernel_paths.emplace_back(kv::isa_name(isa));
  p.libc = gnu_get_libc_version();
  p.client_requests = kv::sim::client_requests_built();
  p.under_valgrind = kv::sim::under_valgrind();
  return p;
}

// The index of the entry named `name`, or an InputError naming the job's field.
template <class T>
std::size_t index_of(const std::vector<T>& list, const std::string& name, const std::string& job, const char* field) {
  const auto it = std::find_if(list.begin(), list.end(), [&](const T& item) { return item.name == name; });
  if (it == list.end()) throw kv::InputError(job, field, "'" + name + "' is not in the suite");
  return static_cast<std::size_t>(it - list.begin());
}

// The run's suite as the run holds it: found again, with the run's overrides, and the same hash.
SuiteConfig job_suite(const SimJob& job, const std::string& path) {
  SuiteConfig suite = find_suite(job.suite_spec);
  suite.file = job.suite_file;
  suite.socs = job.socs;
  suite.noise_threshold = job.noise_threshold;
  suite.sim = true;
  if (config_hash(resolved_json(suite)) != job.config_hash) {
    throw kv::InputError(path, "config_hash", "the suite " + job.suite_spec + " changed since the run began");
  }
  return suite;
}

}  // namespace

void add_sim_repetition_command(CLI::App& app, SimRepetitionOptions& o) {
  o.command = app.add_subcommand("sim-repetition", "The child of a sim run (kvbench run --sim), run under callgrind");
  o.command->group("");  // not a command for people
  o.command->add_option("job", o.job, "the job file");
  o.command->add_option("--probe", o.probe, "write the kernel paths this process sees to this file, and stop");
}

int run_sim_repetition(const SimRepetitionOptions& o) {
  if (!o.probe.empty()) {
    write_sim_probe(o.probe, probe());
    return 0;
  }
  if (o.job.empty()) throw kv::InputError("sim-repetition", "job", "the job file is required");
  const SimJob job = read_sim_job(o.job);
  const SuiteConfig suite = job_suite(job, o.job);
  PlannedCase planned;
  planned.info = {job.model, job.workload, job.policy, "host", ""};
  planned.model_index = index_of(suite.models, job.model, o.job, "model");
  planned.workload_index = index_of(suite.workloads, job.workload, o.job, "workload");
  planned.policy_index = index_of(suite.policies, job.policy, o.job, "policy");
  const PreparedSuite prepared = prepare_suite(suite, {planned}, job.models_dir);
  const PreparedCase& c = prepared.cases.front();
  if (!c.script.skipped.empty()) throw kv::InputError(o.job, "case", "the case is skipped here: " + c.script.skipped);
  const std::string l2 = job.l2 ? kSimL2Dir : "";
  Capacities capacities{job.l0_bytes, job.l1_bytes};
  RepetitionContext context;
  context.seed = suite.seed;
  context.noise_threshold = suite.noise_threshold;
  context.l2_dir = &l2;
  context.capacities = job.l0_bytes > 0 || job.l1_bytes > 0 ? &capacities : nullptr;
  context.prefix_warm = suite.prefix_warm;
  // On a thread of its own: its allocator arena and cache start empty, so what the preparation
  // allocated (paths of every length, the suite) does not move where the engine's allocations
  // land, nor the allocator's paths the sim clock counts.
  CountedRun run;
  std::exception_ptr failed;
  std::thread([&] {
    try {
      run = run_engine_counted(c, context);
    } catch (...) {
      failed = std::current_exception();
    }
  }).join();
  if (failed) std::rethrow_exception(failed);
  write_sim_result(kSimResultFile, {run.prefill_tokens, run.decode_tokens, c.model->preset != nullptr, run.kernel_path});
  return 0;
}

}  // namespace kvbench
