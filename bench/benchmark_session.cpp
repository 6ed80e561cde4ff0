#include "benchmark_session.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "runtime/error.h"

namespace kvbench::micro {

namespace {

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n == 0 ? 0.0 : n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// Keeps every repetition's run; prints nothing (calibrate says what it measured).
class CaptureReporter final : public benchmark::BenchmarkReporter {
 public:
  struct Repetitions {
    std::vector<double> seconds;
    std::map<std::string, std::vector<double>> counters;
    std::string label, error;
  };
  std::map<std::string, Repetitions> runs;

  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& report) override {
    for (const Run& run : report) {
      if (run.run_type != Run::RT_Iteration) continue;
      Repetitions& r = runs[run.run_name.function_name];
      if (run.error_occurred) {
        r.error = run.error_message;
        continue;
      }
      r.seconds.push_back(run.iterations > 0 ? run.real_accumulated_time / static_cast<double>(run.iterations) : 0.0);
      for (const auto& [name, counter] : run.counters) r.counters[name].push_back(counter.value);
      r.label = run.report_label;
    }
  }
};

}  // namespace

double BenchmarkFigures::counter(const std::string& name) const {
  const auto it = counters.find(name);
  if (it == counters.end()) throw std::out_of_range("benchmark counter '" + name + "' was not reported");
  return it->second;
}

std::map<std::string, BenchmarkFigures> BenchmarkSession::run() {
  CaptureReporter reporter;
  try {
    benchmark::RunSpecifiedBenchmarks(&reporter, ".");
  } catch (...) {
    benchmark::ClearRegisteredBenchmarks();
    throw;
  }
  benchmark::ClearRegisteredBenchmarks();
  std::map<std::string, BenchmarkFigures> out;
  for (auto& [name, r] : reporter.runs) {
    if (!r.error.empty()) throw kv::InputError(name, "benchmark", r.error);
    BenchmarkFigures& f = out[name];
    f.seconds_per_iteration = median(r.seconds);
    for (auto& [counter, values] : r.counters) f.counters[counter] = median(values);
    f.label = r.label;
  }
  return out;
}

}  // namespace kvbench::micro
