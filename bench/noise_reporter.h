// Puts the machine's noise on every benchmark row: a reporter wrapper adds the counter
// noise_cpu_pct (others' CPU time, steal included, over all cores' time, in percent: the
// harness's noise_cpu_share x 100) measured from the previous row's report to this one, so over
// the benchmark's setup and runs. A figure taken while the VM's host or a neighbour was busy then
// says so in its own row and in --benchmark_out. Memory-bandwidth contention from other
// machines on the same host does not show in it.
#pragma once

#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "machine.h"

namespace kvbench::micro {

// One measurement per benchmark, shared by all of its reports: the library reports a
// benchmark's runs, then its aggregates (with repetitions), to the display and then the file.
class NoiseMeter {
 public:
  NoiseMeter() : last_(cpu_sample()) {}
  // noise_cpu_share from the previous benchmark's first report to this benchmark's first.
  double share_for(const std::string& benchmark);

 private:
  CpuSample last_;
  std::string measured_;  // the benchmark last measured, and its figure
  double share_ = 0.0;
};

class NoiseReporter : public benchmark::BenchmarkReporter {
 public:
  NoiseReporter(std::unique_ptr<benchmark::BenchmarkReporter> inner, NoiseMeter& meter) : inner_(std::move(inner)), meter_(meter) {}
  bool ReportContext(const Context& context) override;
  void ReportRuns(const std::vector<Run>& report) override;
  void Finalize() override { inner_->Finalize(); }

 private:
  std::unique_ptr<benchmark::BenchmarkReporter> inner_;
  NoiseMeter& meter_;
};

// The file reporter that --benchmark_out_format names (json or console); nullptr for any other
// name (the library then makes its own - csv, deprecated in 1.7, without the noise column - or
// reports the bad name).
std::unique_ptr<benchmark::BenchmarkReporter> file_reporter_for(const std::string& format);

}  // namespace kvbench::micro
