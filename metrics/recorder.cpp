#include "recorder.h"

#include "metric_table.h"

#include <algorithm>
#include <string>

namespace kvbench {

void Recorder::add_span(kv::Phase phase, kv::Span span, double ms) {
  span_ms_[static_cast<int>(phase)][static_cast<int>(span)] += ms;
}

void Recorder::on_page_sealed(const kv::PageSealed& event) {
  counters_["pages_sealed"] += 1.0;
  if (!event.health.has_reference) return;
  ++health_pages_;
  drift_sum_ += event.health.scale_drift_mean;
  drift_max_ = std::max(drift_max_, static_cast<double>(event.health.scale_drift_max));
  outlier_sum_ += event.health.outlier_channel_ratio;
  clip_sum_ += event.health.clip_ratio;
  append("scale_drift", event.health.scale_drift_mean);
}

void Recorder::on_nan_inf(int /*layer*/, std::uint64_t count) { counters_["nan_inf_count"] += static_cast<double>(count); }

void Recorder::on_kernel(kv::KernelKind kind, kv::Isa isa) {
  const std::string key = std::string(kind == kv::KernelKind::Decode ? "kernel_decode_" : "kernel_prefill_") +
                          std::string(kv::isa_name(isa));
  if (counters_[key]++ == 0) event(kernel_event(kind, isa));  // each path once
}

void Recorder::on_ops(kv::Phase phase, const kv::OpCounts& counts) {
  ops_[static_cast<int>(phase)] += counts;
  (counts.attention_calls > 0 || counts.selections > 0 ? open_attention_ : open_append_) += counts;
}

kv::soc::StepOps Recorder::close_step(kv::Phase phase, int request, int tokens) {
  kv::soc::StepOps step;
  step.phase = phase;
  step.request = request;
  step.tokens = tokens;
  step.append = open_append_;
  step.attention = open_attention_;
  open_append_ = {};
  open_attention_ = {};
  return step;
}

void Recorder::on_selection(const kv::SelectionEvent& event) {
  double kept = 0.0;
  for (int tokens : event.kept_tokens) kept += tokens;
  const double ratio = event.context_tokens > 0 && !event.kept_tokens.empty()
                           ? kept / (static_cast<double>(event.context_tokens) * static_cast<double>(event.kept_tokens.size()))
                           : 1.0;
  append("keep_ratio", ratio);
  // token_drop_ratio: the mean over every (step, layer, kv head) of the share of context tokens
  // not attended.
  for (int tokens : event.kept_tokens) {
    dropped_share_sum_ += event.context_tokens > 0 ? 1.0 - static_cast<double>(tokens) / event.context_tokens : 0.0;
    ++head_selections_;
  }
  auto& histogram = histograms_["importance_score"];
  histogram.resize(std::max(histogram.size(), event.score_histogram.size()), 0);
  for (std::size_t i = 0; i < event.score_histogram.size(); ++i) histogram[i] += event.score_histogram[i];
}

void Recorder::on_budget_change(const kv::BudgetChange& change) { event(budget_event(change)); }

void Recorder::on_selection_quality(const kv::SelectionQuality& quality) {
  recall_sum_ += quality.attn_mass_recall;
  oracle_sum_ += quality.oracle_mass_recall;
  miss_sum_ += quality.critical_miss_rate;
  oracle_miss_sum_ += quality.oracle_critical_miss_rate;
  rel_error_sum_ += quality.attn_rel_error;
  cosine_sum_ += quality.attn_cosine;
  ++quality_checks_;
  needles_ += static_cast<std::uint64_t>(quality.needles);
  needles_kept_ += static_cast<std::uint64_t>(quality.needles_kept);
  if (quality.has_images) {
    visual_recall_sum_ += quality.visual_mass_recall;
    visual_oracle_sum_ += quality.visual_oracle_mass_recall;
    visual_drop_sum_ += quality.visual_token_drop;
    ++visual_checks_;
  }
  RequestQuality& request = by_request_[request_];
  request.recall_sum += quality.attn_mass_recall;
  ++request.checks;
  request.needles += static_cast<std::uint64_t>(quality.needles);
  request.needles_kept += static_cast<std::uint64_t>(quality.needles_kept);
}

void Recorder::on_token_dropped(const kv::TokenDropped& drop) { event(token_dropped_event(drop)); }

void Recorder::on_memory_event(const kv::MemoryEvent& e) {
  event(memory_event(e));
  if (e.kind == kv::MemoryEvent::Kind::L2Failed) add("l2_errors");
  if (e.kind == kv::MemoryEvent::Kind::Overflow) add("l1_overflow_events");
  if (e.kind == kv::MemoryEvent::Kind::SelectionShift) {
    add("selection_shifts");
    add("selection_shift_loads", static_cast<double>(e.pages));
  }
}

void Recorder::on_memory_sample(const kv::MemorySample& sample) {
  append("l0_bytes", static_cast<double>(sample.l0_bytes));
  append("l1_used_bytes", static_cast<double>(sample.l1_used_bytes));
  append("l2_live_bytes", static_cast<double>(sample.l2_live_bytes));
  append("demand_loads", static_cast<double>(sample.demand_loads));
  append("prefetch_hits", static_cast<double>(sample.prefetch_hits));
  append("prefetch_unused", static_cast<double>(sample.prefetch_unused));
  const double seconds = static_cast<double>(sample.step_ns) * 1e-9;
  append("swap_in_gb_per_s", seconds > 0.0 ? static_cast<double>(sample.swap_in_bytes) / seconds * 1e-9 : 0.0);
  append("swap_out_gb_per_s", seconds > 0.0 ? static_cast<double>(sample.swap_out_bytes) / seconds * 1e-9 : 0.0);
  gauge("l1_used_bytes", static_cast<double>(sample.l1_used_bytes));
  if (sample.level == kv::PressureLevel::Danger) add("pressure_danger_steps");
}

void Recorder::on_span(kv::Phase phase, kv::Span span, std::uint64_t ns) { add_span(phase, span, static_cast<double>(ns) * 1e-6); }

double Recorder::counter(const std::string& name) const {
  const auto it = counters_.find(name);
  return it == counters_.end() ? 0.0 : it->second;
}

const Gauge* Recorder::find_gauge(const std::string& name) const {
  const auto it = gauges_.find(name);
  return it == gauges_.end() ? nullptr : &it->second;
}

const std::vector<double>* Recorder::find_series(const std::string& name) const {
  const auto it = series_.find(name);
  return it == series_.end() ? nullptr : &it->second;
}

std::map<std::string, double> Recorder::scalars() const {
  std::map<std::string, double> out;
  for (int phase = 0; phase < kv::kPhaseCount; ++phase) {
    for (int span = 0; span < kv::kSpanCount; ++span) {
      const double ms = span_ms_[phase][span];
      if (ms == 0.0) continue;
      out[span_metric_name(kv::phase_name(static_cast<kv::Phase>(phase)), kv::span_name(static_cast<kv::Span>(span)))] = ms;
    }
  }
  out["nan_inf_count"] = counter("nan_inf_count");
  if (health_pages_ > 0) {
    const auto n = static_cast<double>(health_pages_);
    out["scale_drift_mean"] = drift_sum_ / n;
    out["scale_drift_max"] = drift_max_;
    out["outlier_channel_ratio"] = outlier_sum_ / n;
    out["clip_ratio"] = clip_sum_ / n;
  }
  if (head_selections_ > 0) out["token_drop_ratio"] = token_drop_ratio();
  if (quality_checks_ > 0) {
    out["attn_mass_recall"] = recall_sum_ / static_cast<double>(quality_checks_);
    out["oracle_mass_recall"] = oracle_sum_ / static_cast<double>(quality_checks_);
    out["critical_miss_rate"] = miss_sum_ / static_cast<double>(quality_checks_);
    out["oracle_critical_miss_rate"] = oracle_miss_sum_ / static_cast<double>(quality_checks_);
    out["attn_rel_error"] = rel_error_sum_ / static_cast<double>(quality_checks_);
    out["attn_cosine"] = cosine_sum_ / static_cast<double>(quality_checks_);
  }
  if (visual_checks_ > 0) {
    const auto n = static_cast<double>(visual_checks_);
    out["visual_attn_mass_recall"] = visual_recall_sum_ / n;
    out["visual_oracle_mass_recall"] = visual_oracle_sum_ / n;
    out["visual_token_drop"] = visual_drop_sum_ / n;
  }
  if (needles_ > 0) out["needle_recall"] = static_cast<double>(needles_kept_) / static_cast<double>(needles_);
  return out;
}

}  // namespace kvbench
