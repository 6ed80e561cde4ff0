#include "noise_reporter.h"

namespace kvbench::micro {

double NoiseMeter::share_for(const std::vector<benchmark::BenchmarkReporter::Run>& report) {
  // The second reporter of the same group gets the figure the first one measured.
  const std::string name = report.empty() ? std::string() : report.front().benchmark_name();
  if (group_ == static_cast<const void*>(&report) && name == group_name_) {
    group_ = nullptr;
    return share_;
  }
  const CpuSample now = cpu_sample();
  share_ = noise_between(last_, now).cpu_share;
  last_ = now;
  group_ = &report;
  group_name_ = name;
  return share_;
}

bool NoiseReporter::ReportContext(const Context& context) {
  // The library sets the streams on this object (SetOutputStream is not virtual).
  inner_->SetOutputStream(&GetOutputStream());
  inner_->SetErrorStream(&GetErrorStream());
  return inner_->ReportContext(context);
}

void NoiseReporter::ReportRuns(const std::vector<Run>& report) {
  const double share = meter_.share_for(report);
  std::vector<Run> marked = report;
  for (Run& run : marked) run.counters["noise_cpu_pct"] = benchmark::Counter(100.0 * share);
  inner_->ReportRuns(marked);
}

std::unique_ptr<benchmark::BenchmarkReporter> file_reporter_for(const std::string& format) {
  if (format == "json") return std::make_unique<benchmark::JSONReporter>();
  if (format == "console") return std::make_unique<benchmark::ConsoleReporter>(benchmark::ConsoleReporter::OO_None);
  return nullptr;
}

}  // namespace kvbench::micro
