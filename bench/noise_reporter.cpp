#include "noise_reporter.h"

namespace kvbench::micro {

double NoiseMeter::share_for(const std::string& benchmark) {
  // Later reports of the same benchmark (its aggregates, the file reporter's copy) get the
  // figure its first report measured.
  if (benchmark != measured_) {
    const CpuSample now = cpu_sample();
    // A benchmark runs long enough for /proc/stat's ticks; a short one reads as quiet.
    share_ = noise_between(last_, now, {}, {}).cpu_share.value_or(0.0);
    last_ = now;
    measured_ = benchmark;
  }
  return share_;
}

bool NoiseReporter::ReportContext(const Context& context) {
  // The library sets the streams on this object (SetOutputStream is not virtual).
  inner_->SetOutputStream(&GetOutputStream());
  inner_->SetErrorStream(&GetErrorStream());
  return inner_->ReportContext(context);
}

void NoiseReporter::ReportRuns(const std::vector<Run>& report) {
  if (report.empty()) return inner_->ReportRuns(report);
  const double share = meter_.share_for(report.front().run_name.str());
  std::vector<Run> marked = report;
  for (Run& run : marked) {
    // A percentage aggregate (cv) prints its counters as percentages of themselves: skip it.
    if (run.run_type == Run::RT_Aggregate && run.aggregate_unit == benchmark::kPercentage) continue;
    run.counters["noise_cpu_pct"] = benchmark::Counter(100.0 * share);
  }
  inner_->ReportRuns(marked);
}

std::unique_ptr<benchmark::BenchmarkReporter> file_reporter_for(const std::string& format) {
  if (format == "json") return std::make_unique<benchmark::JSONReporter>();
  if (format == "console") return std::make_unique<benchmark::ConsoleReporter>(benchmark::ConsoleReporter::OO_None);
  return nullptr;
}

}  // namespace kvbench::micro
