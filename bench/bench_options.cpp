#include "bench_options.h"

namespace kvbench::micro {

Options& options() {
  static Options instance;
  return instance;
}

}  // namespace kvbench::micro
