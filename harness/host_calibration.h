// Host calibration: measures this machine the way the cost model prices it - stream bandwidth,
// the achieved rates of the engine's own kernels (decode attention per KV format, chunked
// prefill, Quest bounds, page sealing), exponentials, dense layers per weight format, and the L2
// directory through the engine's own store - and returns a host SocProfile whose every number
// says how it was measured or derived. The timings are Google Benchmark runs of kvbench-micro's
// bodies on the kernel-case registry's cases (calibration_steps.h).
#pragma once

#include <functional>
#include <string>

#include "soc/soc_profile.h"

namespace kvbench {

struct CalibrationOptions {
  std::string l2_dir;        // an existing directory for the L2 measurements
  double min_seconds = 0.25; // per repetition of each benchmark (three, the median kept)
  int threads = 0;           // the engine's thread pool (0: all cores, like the policies' default)
  bool quick = false;        // smaller contexts, buffers and files, no cache-defeating copies: rougher, for checks
  std::function<void(const std::string&)> progress;  // one line per finished measurement
};

// Throws kv::InputError when the L2 directory cannot be used.
kv::soc::SocProfile calibrate_host(const CalibrationOptions& options);

}  // namespace kvbench
