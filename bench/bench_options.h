// Options of kvbench-micro that are not Google Benchmark's own (parsed before it sees argv).
#pragma once

#include "runtime/isa.h"

namespace kvbench::micro {

struct Options {
  kv::Isa isa = kv::Isa::Auto;  // --isa: kernel path the engine benchmarks use
  int threads = 0;              // --threads: engine thread pool size, 0 = all cores
};

Options& options();

}  // namespace kvbench::micro
