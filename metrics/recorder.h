// The telemetry recorder: the engine's Telemetry sink for one case repetition. It keeps
// counters, gauges with their peaks, histograms, time series per step, spans (accumulated
// wall time per phase and name) and events (pressure transitions, budget changes, token drops,
// kernel paths), and turns them into the named scalars of the metric contract.
//
// Cost: every callback is a few additions or a push_back; nothing allocates per call except
// series and event appends. Single-threaded, like the engine's API.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "run_event.h"
#include "soc/cost_model.h"
#include "telemetry.h"

namespace kvbench {

struct Gauge {
  double value = 0.0;
  double peak = 0.0;
  void set(double v) {
    value = v;
    if (v > peak) peak = v;
  }
};

class Recorder final : public kv::Telemetry {
 public:
  // Generic instruments, also for the runner's own figures.
  void add(const std::string& counter, double amount = 1.0) { counters_[counter] += amount; }
  void gauge(const std::string& name, double value) { gauges_[name].set(value); }
  void append(const std::string& series, double value) { series_[series].push_back(value); }
  void event(RunEvent event) { events_.push_back(std::move(event)); }
  void add_span(kv::Phase phase, kv::Span span, double ms);

  // RAII: the wall time between construction and destruction joins span_<phase>_<name>_ms.
  class ScopedSpan {
   public:
    ScopedSpan(Recorder& recorder, kv::Phase phase, kv::Span span)
        : recorder_(recorder), phase_(phase), span_(span), start_(std::chrono::steady_clock::now()) {}
    ~ScopedSpan() {
      recorder_.add_span(phase_, span_,
                         std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count());
    }
    ScopedSpan(const ScopedSpan&) = delete;
    ScopedSpan& operator=(const ScopedSpan&) = delete;

   private:
    Recorder& recorder_;
    kv::Phase phase_;
    kv::Span span_;
    std::chrono::steady_clock::time_point start_;
  };

  // kv::Telemetry
  void on_page_sealed(const kv::PageSealed& event) override;
  void on_nan_inf(int layer, std::uint64_t count) override;
  void on_kernel(kv::KernelKind kind, kv::Isa isa) override;
  void on_ops(kv::Phase phase, const kv::OpCounts& counts) override;
  void on_selection(const kv::SelectionEvent& event) override;
  void on_budget_change(const kv::BudgetChange& change) override;
  void on_selection_quality(const kv::SelectionQuality& quality) override;
  void on_token_dropped(const kv::TokenDropped& drop) override;
  void on_memory_event(const kv::MemoryEvent& event) override;
  void on_memory_sample(const kv::MemorySample& sample) override;
  void on_span(kv::Phase phase, kv::Span span, std::uint64_t ns) override;

  double counter(const std::string& name) const;
  const Gauge* find_gauge(const std::string& name) const;
  const std::vector<double>* find_series(const std::string& name) const;
  const std::map<std::string, std::vector<double>>& series() const { return series_; }
  const std::map<std::string, std::vector<std::int64_t>>& histograms() const { return histograms_; }
  const std::vector<RunEvent>& events() const { return events_; }
  const kv::OpCounts& ops(kv::Phase phase) const { return ops_[static_cast<int>(phase)]; }
  // Per-step operation counts, the cost model's input: on_ops adds to the open step (selection
  // and attention calls to its attention part, page sealing to its append part); close_step
  // ends it.
  kv::soc::StepOps close_step(kv::Phase phase, int request, int tokens);

  // Named scalars this recorder can state (quantization health, selection quality, spans);
  // a name is absent when nothing was observed for it.
  std::map<std::string, double> scalars() const;
  // The mean over every (step, layer, kv head) of the share of context tokens a sparse plan left
  // out; 0 before any selection. The one owner of the figure.
  double token_drop_ratio() const {
    return head_selections_ > 0 ? dropped_share_sum_ / static_cast<double>(head_selections_) : 0.0;
  }
  // Means over the sampled quality checks so far (0 before any); needle recall is 1 when no
  // needle was present.
  double attn_mass_recall() const { return quality_checks_ > 0 ? recall_sum_ / static_cast<double>(quality_checks_) : 0.0; }
  double oracle_mass_recall() const { return quality_checks_ > 0 ? oracle_sum_ / static_cast<double>(quality_checks_) : 0.0; }
  double critical_miss_rate() const { return quality_checks_ > 0 ? miss_sum_ / static_cast<double>(quality_checks_) : 0.0; }
  double oracle_critical_miss_rate() const {
    return quality_checks_ > 0 ? oracle_miss_sum_ / static_cast<double>(quality_checks_) : 0.0;
  }
  double needle_recall() const { return needles_ > 0 ? static_cast<double>(needles_kept_) / static_cast<double>(needles_) : 1.0; }
  // Quality checks are also kept per request (the executor says which request runs): later turns
  // and requests over a shared context can degrade while the mean hides it.
  void set_request(int request) { request_ = request; }
  struct RequestQuality {
    double recall_sum = 0.0;
    std::uint64_t checks = 0, needles = 0, needles_kept = 0;
  };
  const std::map<int, RequestQuality>& quality_by_request() const { return by_request_; }

 private:
  std::map<std::string, double> counters_;
  std::map<std::string, Gauge> gauges_;
  std::map<std::string, std::vector<double>> series_;
  std::map<std::string, std::vector<std::int64_t>> histograms_;
  std::vector<RunEvent> events_;
  // Spans in ms, [phase][span], named span_<phase>_<name>_ms by scalars().
  double span_ms_[kv::kPhaseCount][kv::kSpanCount] = {};
  kv::OpCounts ops_[kv::kPhaseCount];
  kv::OpCounts open_append_, open_attention_;
  // Quantization health over sealed pages that had a reference.
  double drift_sum_ = 0.0, drift_max_ = 0.0, outlier_sum_ = 0.0, clip_sum_ = 0.0;
  std::uint64_t health_pages_ = 0;
  // Selection: the dropped share summed over (step, layer, kv head).
  double dropped_share_sum_ = 0.0;
  std::uint64_t head_selections_ = 0;
  double recall_sum_ = 0.0, oracle_sum_ = 0.0, miss_sum_ = 0.0, oracle_miss_sum_ = 0.0, rel_error_sum_ = 0.0, cosine_sum_ = 0.0;
  std::uint64_t quality_checks_ = 0, needles_ = 0, needles_kept_ = 0;
  // The checks of contexts with visual tokens.
  double visual_recall_sum_ = 0.0, visual_oracle_sum_ = 0.0, visual_drop_sum_ = 0.0;
  std::uint64_t visual_checks_ = 0;
  int request_ = 0;
  std::map<int, RequestQuality> by_request_;
};

}  // namespace kvbench
