// Options of kvbench-micro that are not Google Benchmark's own (parsed before it sees argv).
#pragma once

#include <string>

#include "runtime/isa.h"

namespace kvbench::micro {

struct Options {
  kv::Isa isa = kv::Isa::Auto;  // --isa: kernel path the engine benchmarks use
  int threads = 0;              // --threads: engine thread pool size, 0 = all cores
  std::string l2_dir;           // --l2-dir: where the L2 benchmarks put their files ("": the temp dir)
};

// The directory for L2 files: --l2-dir, else the system temporary directory.
std::string l2_dir();

Options& options();

}  // namespace kvbench::micro
