// A sim run (`kvbench run --sim`, or a suite's "sim": true). Each engine run of a repetition runs
// twice: natively, as a host run would, for its exact and modelled figures; and as a child
// process under Valgrind's callgrind (`kvbench sim-repetition`, an EngineRunKind::Counted run)
// whose counted regions (engine/sim_regions.h) give its sim figures. The repetition keeps the
// native run's exact and modelled figures, the child's sim figures, and NULL for its host and
// cpu figures. A child runs in a fresh directory of its own with a fixed environment and
// relative paths, so that nothing about where or when it ran changes what it executes.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "case_preparation.h"
#include "engine_run.h"
#include "suite_config.h"

namespace kvbench {

// What the callgrind children of a run share, checked before the run starts.
struct SimSetup {
  std::string self;                        // this binary (/proc/self/exe)
  std::string valgrind;                    // `valgrind --version`
  std::string kernel_path;                 // the attention kernels' path under valgrind (auto)
  std::vector<std::string> kernel_paths;   // every path the kernels can take under valgrind
  std::string libc;                        // the C library's version (glibc)
  // How a child finds the run's suite and checks that it is the one the run holds.
  std::string suite_spec;   // a built-in suite's name or the file's absolute path
  std::string suite_file;   // SuiteConfig::file as the run holds it
  std::vector<std::string> socs;
  double noise_threshold = 0.0;
  std::string config_hash;  // of the run's resolved suite
  std::string models_dir;

  // The run's meta_json "sim": the tool and its versions, the kernel path, the compiler, the C
  // library, the engine's thread count and L2 mode, the simulated caches and callgrind's options.
  nlohmann::json metadata() const;
};

// A sim run's checks before anything runs: valgrind on PATH, this build with callgrind's client
// requests, and every policy's kernel path one that valgrind runs (it has no AVX-512). Throws
// InputError naming --sim (or the policy's isa) otherwise.
SimSetup prepare_sim(const SuiteConfig& suite, const std::vector<PreparedCase>& cases, const std::string& models_dir);

// One engine run of a sim repetition: the native run, then its counted child. Throws
// ExecutionStopped when context.stop reads true, std::runtime_error when the child fails (its
// log's tail in the message).
EngineRun run_engine_sim(const PreparedCase& c, const RepetitionContext& context, int repetition, const SimSetup& sim);

// The reason a sim run's host and cpu figures are NULL.
inline constexpr const char* kSimRunNoHostFigures =
    "a sim run: its engine runs are counted under callgrind (clock sim); host and cpu figures come from runs without --sim";

}  // namespace kvbench
