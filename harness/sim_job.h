// What a sim run hands its callgrind child and what the child hands back, as files in the
// child's own directory (harness/sim_run.h): the job (which case, from which suite, with which
// capacities), the child's result (what it executed) and the probe of the kernel paths under
// valgrind. Parent and child are the same binary: the files are theirs alone.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace kvbench {

// The child's directory holds these, by these names; the child runs in it.
inline constexpr const char* kSimJobFile = "job.json";
inline constexpr const char* kSimResultFile = "result.json";
inline constexpr const char* kSimProfileFile = "callgrind.out";
inline constexpr const char* kSimLogFile = "log";
inline constexpr const char* kSimL2Dir = "l2";           // the child's L2 directory (a link to the run's)
inline constexpr const char* kSimBinary = "kvbench";     // a link to the binary, so argv[0] is the same everywhere

struct SimJob {
  // The run's suite, found again by the child and checked against the run's hash.
  std::string suite_spec;  // a built-in suite's name or an absolute path
  std::string suite_file;  // SuiteConfig::file as the run holds it
  std::vector<std::string> socs;
  double noise_threshold = 0.0;
  std::string config_hash;
  std::string models_dir;
  // The case's engine run.
  std::string model, workload, policy;
  bool l2 = false;            // the run gives the case an L2 directory (kSimL2Dir)
  std::size_t l0_bytes = 0;   // a SoC's capacities; 0: the policy's
  std::size_t l1_bytes = 0;
};

// What the child executed.
struct SimChildResult {
  int prefill_tokens = 0;
  int decode_tokens = 0;
  bool synthetic = false;
  std::string kernel_path;
};

// The kernel paths as the child sees them under valgrind, and its C library.
struct SimProbe {
  std::string kernel_path;
  std::vector<std::string> kernel_paths;
  std::string libc;
  bool client_requests = false;  // the build has callgrind's client requests
  bool under_valgrind = false;
};

// Each writes `path` (throws std::runtime_error when it cannot) or reads it (throws
// kv::InputError naming the file and field for anything it does not hold as written).
void write_sim_job(const std::string& path, const SimJob& job);
SimJob read_sim_job(const std::string& path);
void write_sim_result(const std::string& path, const SimChildResult& result);
SimChildResult read_sim_result(const std::string& path);
void write_sim_probe(const std::string& path, const SimProbe& probe);
SimProbe read_sim_probe(const std::string& path);

}  // namespace kvbench
