#include "bench_options.h"

#include <filesystem>

namespace kvbench::micro {

Options& options() {
  static Options instance;
  return instance;
}

std::string l2_dir() {
  return options().l2_dir.empty() ? std::filesystem::temp_directory_path().string() : options().l2_dir;
}

}  // namespace kvbench::micro
