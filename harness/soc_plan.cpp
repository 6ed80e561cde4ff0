#include "soc_plan.h"

#include <fmt/format.h>

#include <algorithm>

#include "case_pricing.h"
#include "degradation.h"
#include "metric_table.h"

namespace kvbench {

namespace {

// Series timed on this host; a case priced for another SoC leaves them out with the host figures.
bool host_timed_series(const std::string& name) {
  return name == "ttft_ms" || name == "ttft_ms_by_request" || name == "tpot_ms" || name == "request_tpot_ms" || name == "swap_in_gb_per_s" ||
         name == "swap_out_gb_per_s";
}

std::string gib(double bytes) { return fmt::format("{:.2f} GiB", bytes / (1024.0 * 1024.0 * 1024.0)); }

}  // namespace

bool holds_weights(const kv::soc::SocProfile& p, double weights) {
  return weights + p.runtime_reserve_bytes.value <= p.model_budget_bytes.value;
}

RunEvent weights_do_not_fit(const kv::soc::SocProfile& p, double weights) {
  return note_event(EventKind::DoesNotFit,
                    fmt::format("{}: the weights ({}) and the runtime reserve ({}) exceed the model budget ({}); "
                                "priced from the host run's capacities, fits_in_memory 0",
                                p.name, gib(weights), gib(p.runtime_reserve_bytes.value), gib(p.model_budget_bytes.value)));
}

SocPlan plan_soc(const kv::soc::SocProfile& p, double weights, double peak_l1, const kv::MemoryConfig& memory,
                 std::uint64_t floor_bytes) {
  SocPlan plan;
  const double kv_budget = p.model_budget_bytes.value - weights - p.runtime_reserve_bytes.value;
  const bool l1_short = kv_budget < peak_l1;
  const bool l0_short = p.l0.capacity_bytes.value < static_cast<double>(memory.l0_bytes);
  if (!l1_short && !l0_short) return plan;
  std::string why;
  if (l1_short) {
    plan.capacities.l1_bytes = static_cast<std::size_t>(kv_budget);
    if (memory.l1_bytes > 0) plan.capacities.l1_bytes = std::min(plan.capacities.l1_bytes, memory.l1_bytes);
    why = fmt::format("its KV budget ({}: model budget less weights and reserve) is below the host run's peak L1 ({})", gib(kv_budget),
                      gib(peak_l1));
  }
  if (l0_short) {
    plan.capacities.l0_bytes = static_cast<std::size_t>(p.l0.capacity_bytes.value);
    why += fmt::format("{}its L0 ({} KiB) is smaller than the policy's ({} KiB)", why.empty() ? "" : " and ",
                       plan.capacities.l0_bytes >> 10, memory.l0_bytes >> 10);
  }
  if (l1_short && plan.capacities.l1_bytes < floor_bytes) {
    plan.note = note_event(EventKind::DoesNotFit,
                           fmt::format("{}: {}, and it cannot even hold the {} no demotion can free (pinned and residual "
                                       "pages, summaries); priced from the host run's capacities",
                                       p.name, why, gib(static_cast<double>(floor_bytes))));
    plan.capacities = {};
    return plan;
  }
  plan.rerun = true;
  plan.note = note_event(EventKind::CapacityRerun,
                         fmt::format("{}: {}; the engine ran again with L0 {} KiB and L1 {}", p.name, why,
                                     (plan.capacities.l0_bytes > 0 ? plan.capacities.l0_bytes : memory.l0_bytes) >> 10,
                                     plan.capacities.l1_bytes > 0 ? gib(static_cast<double>(plan.capacities.l1_bytes))
                                                                  : std::string("uncapped")));
  return plan;
}

// The stored repetition of one SoC's case: the run's exact figures (and host ones on the host's
// case), the model clock priced with the SoC's profile, and the pricing notes.
PricedRepetition priced_repetition(const EngineRun& run, const Pricing& how) {
  PricedRepetition rep;
  RepetitionRecord& record = rep.record;
  const int repetition = run.record.repetition;
  record.repetition = repetition;
  for (const MetricRecord& m : run.record.metrics) {
    if (how.host_case || !host_work(m.clock)) record.metrics.push_back(m);
  }
  PricedCase priced = run.priced;
  priced.steps = &run.steps;
  for (MetricRecord& m : modelled_metrics(priced, *how.profile, repetition)) record.metrics.push_back(std::move(m));
  MetricRecord rerun;
  rerun.repetition = repetition;
  rerun.name = "capacity_rerun";
  rerun.value = how.rerun ? 1.0 : 0.0;
  rerun.unit = metric(rerun.name).unit;
  rerun.clock = Clock::Exact;
  record.metrics.push_back(rerun);
  for (const auto& [name, values] : run.record.series) {
    if (how.host_case || !host_timed_series(name)) record.series.emplace_back(name, values);
  }
  record.histograms = run.record.histograms;
  record.events = how.notes;
  record.events.insert(record.events.end(), run.record.events.begin(), run.record.events.end());
  rep.degraded = !degradation_lines(record.metrics, record.events).empty();
  return rep;
}

}  // namespace kvbench
