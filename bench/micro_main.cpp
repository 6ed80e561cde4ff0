// kvbench-micro: our flags (--isa, --threads, --l2-dir) are taken out of argv, the rest goes to Google
// Benchmark. The kernel path is recorded in the benchmark context.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bench_options.h"
#include "kernel_benchmarks.h"
#include "noise_reporter.h"
#include "runtime/error.h"
#include "runtime/thread_limit.h"

namespace {

bool take_value(std::vector<char*>& args, std::size_t& i, std::string_view flag, std::string& value) {
  const std::string_view arg = args[i];
  if (arg == flag && i + 1 < args.size()) {
    value = args[i + 1];
    args.erase(args.begin() + static_cast<long>(i), args.begin() + static_cast<long>(i) + 2);
    return true;
  }
  if (arg.size() > flag.size() + 1 && arg.substr(0, flag.size()) == flag && arg[flag.size()] == '=') {
    value = std::string(arg.substr(flag.size() + 1));
    args.erase(args.begin() + static_cast<long>(i));
    return true;
  }
  return false;
}

void parse_options(std::vector<char*>& args) {
  auto& opts = kvbench::micro::options();
  for (std::size_t i = 1; i < args.size();) {
    std::string value;
    if (take_value(args, i, "--isa", value)) {
      opts.isa = kv::resolve_isa(kv::parse_isa(value, "kvbench-micro --isa"));
    } else if (take_value(args, i, "--threads", value)) {
      char* end = nullptr;
      const long threads = std::strtol(value.c_str(), &end, 10);
      if (end == value.c_str() || *end != '\0') throw kv::InputError("kvbench-micro", "--threads", "'" + value + "' is not a whole number");
      kv::check_thread_count(threads, "kvbench-micro", "--threads");
      opts.threads = static_cast<int>(threads);
    } else if (take_value(args, i, "--l2-dir", value)) {
      if (!std::filesystem::is_directory(value)) {
        throw kv::InputError("kvbench-micro", "--l2-dir", "'" + value + "' is not an existing directory");
      }
      opts.l2_dir = value;
    } else {
      ++i;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args(argv, argv + argc);
  try {
    parse_options(args);
  } catch (const kv::InputError& error) {
    std::fprintf(stderr, "kvbench-micro: error: %s\n", error.what());
    return 2;
  }
  // The registry's cases, with --threads and --l2-dir known (the other families register themselves).
  kvbench::micro::register_kernel_benchmarks();
  // The file reporter is ours too, so its flags are read before the library takes them out.
  std::string out_path, out_format = "json";
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (arg.rfind("--benchmark_out=", 0) == 0) out_path = std::string(arg.substr(16));
    if (arg.rfind("--benchmark_out_format=", 0) == 0) out_format = std::string(arg.substr(23));
  }
  int count = static_cast<int>(args.size());
  benchmark::Initialize(&count, args.data());
  if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 2;
  const kv::Isa isa = kv::resolve_isa(kvbench::micro::options().isa);
  benchmark::AddCustomContext("kvbench_isa", std::string(kv::isa_name(isa)));
  benchmark::AddCustomContext("kvbench_threads", std::to_string(kvbench::micro::options().threads));
  benchmark::AddCustomContext("kvbench_l2_dir", kvbench::micro::l2_dir());
  // Both reporters wrapped so that every row carries noise_cpu_pct (noise_reporter.h).
  kvbench::micro::NoiseMeter meter;
  kvbench::micro::NoiseReporter display(std::unique_ptr<benchmark::BenchmarkReporter>(benchmark::CreateDefaultDisplayReporter()), meter);
  std::unique_ptr<benchmark::BenchmarkReporter> file_inner = out_path.empty() ? nullptr : kvbench::micro::file_reporter_for(out_format);
  if (file_inner != nullptr) {
    kvbench::micro::NoiseReporter file(std::move(file_inner), meter);
    benchmark::RunSpecifiedBenchmarks(&display, &file);
  } else {
    benchmark::RunSpecifiedBenchmarks(&display);
  }
  benchmark::Shutdown();
  return 0;
}
