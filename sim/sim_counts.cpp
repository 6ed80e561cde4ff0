#include "sim_counts.h"

#include <fmt/format.h>

#include "metric_table.h"
#include "runtime/error.h"

namespace kvbench::sim {

namespace {

using kv::Phase;
using kv::sim::WorkPart;

constexpr const char* kCacheEvents[] = {"I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw"};

WorkCounts counts_of(const CallgrindProfile& p, const std::vector<std::uint64_t>& cost) {
  WorkCounts c;
  c.instructions = p.event(cost, "Ir");
  c.l1_misses = p.event(cost, "I1mr") + p.event(cost, "D1mr") + p.event(cost, "D1mw");
  c.ll_misses = p.event(cost, "ILmr") + p.event(cost, "DLmr") + p.event(cost, "DLmw");
  return c;
}

bool same(const WorkCounts& a, const WorkCounts& b) {
  return a.instructions == b.instructions && a.l1_misses == b.l1_misses && a.ll_misses == b.ll_misses;
}

MetricRecord figure(const std::string& name, int repetition) {
  MetricRecord m;
  m.repetition = repetition;
  m.name = name;
  m.unit = metric(name).unit;
  m.clock = Clock::Sim;
  return m;
}

}  // namespace

std::uint64_t WorkCounts::cycles() const {
  return instructions + static_cast<std::uint64_t>(kL1MissCycles) * l1_misses + static_cast<std::uint64_t>(kLLMissCycles) * ll_misses;
}

WorkCounts& WorkCounts::operator+=(const WorkCounts& other) {
  instructions += other.instructions;
  l1_misses += other.l1_misses;
  ll_misses += other.ll_misses;
  return *this;
}

RegionCounts region_counts(const CallgrindProfile& profile, const std::string& where) {
  if (!profile.event_index("Ir")) throw kv::InputError(where, "events", "no instruction counts (Ir)");
  for (const char* event : kCacheEvents) {
    if (!profile.event_index(event)) throw kv::InputError(where, "events", fmt::format("no {} counts: callgrind ran without --cache-sim=yes", event));
  }
  RegionCounts counts{};
  WorkCounts sum;
  for (int phase = 0; phase < kv::kPhaseCount; ++phase) {
    for (int part = 0; part < kv::sim::kWorkPartCount; ++part) {
      const std::string symbol(kv::sim::region_symbol(static_cast<Phase>(phase), static_cast<WorkPart>(part)));
      counts[static_cast<std::size_t>(phase)][static_cast<std::size_t>(part)] = counts_of(profile, profile.function(symbol));
      sum += counts[static_cast<std::size_t>(phase)][static_cast<std::size_t>(part)];
    }
  }
  const WorkCounts total = counts_of(profile, profile.totals);
  if (!same(sum, total)) {
    throw kv::InputError(where, "totals",
                         fmt::format("{} instructions counted in all, {} of them inside the kvbench_sim_* regions: collection was on "
                                     "outside them (callgrind must start with --collect-atstart=no)",
                                     total.instructions, sum.instructions));
  }
  return counts;
}

std::vector<MetricRecord> sim_metrics(const RegionCounts& counts, const SimFigureContext& context) {
  std::vector<MetricRecord> out;
  for (int phase = 0; phase < kv::kPhaseCount; ++phase) {
    const auto p = static_cast<Phase>(phase);
    const std::string phase_name(kv::phase_name(p));
    const bool ran = p == Phase::Prefill ? context.prefill_ran : context.decode_ran;
    const auto& parts = counts[static_cast<std::size_t>(phase)];
    for (const char* part : kWorkSpans) {
      const std::string which(part);
      WorkCounts c;
      if (which == "total") {
        for (const WorkCounts& region : parts) c += region;
      } else {
        const WorkPart region = which == "attend" ? WorkPart::Attend : which == "append" ? WorkPart::Append : WorkPart::Model;
        c = parts[static_cast<std::size_t>(region)];
      }
      std::string reason;
      if (!ran) reason = "no " + phase_name + " phase";
      if (reason.empty() && which == "model_compute" && context.synthetic) {
        reason = "the synthetic generator stands in for model compute (a SoC cost model prices it)";
      }
      const std::uint64_t values[] = {c.instructions, c.l1_misses, c.ll_misses, c.cycles()};
      for (std::size_t f = 0; f < std::size(kSimFigures); ++f) {
        MetricRecord m = figure(span_sim_metric_name(phase_name, part, kSimFigures[f]), context.repetition);
        if (reason.empty()) {
          m.value = static_cast<double>(values[f]);
        } else {
          m.na_reason = reason;
        }
        out.push_back(std::move(m));
      }
    }
  }
  return out;
}

void record_sim_clock(RepetitionRecord& record, const std::vector<MetricRecord>& sim, const std::string& reason) {
  for (MetricRecord& m : record.metrics) {
    if (!measured_here(m.clock)) continue;
    m.value.reset();
    m.na_reason = reason;
    m.noisy = false;
    m.extrapolated = false;
  }
  record.metrics.insert(record.metrics.end(), sim.begin(), sim.end());
}

}  // namespace kvbench::sim
