// kv::Telemetry: how the engine reports what it did. The engine holds a pointer that is null
// by default and checks it before building any report, so the null sink costs one branch.
// metrics/ implements this interface; the engine includes nothing from outside engine/.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string_view>
#include <vector>

#include "memory/memory_events.h"
#include "memory/tier.h"
#include "quant/calibration.h"
#include "quant/format.h"
#include "runtime/isa.h"

namespace kv {

enum class Phase : std::uint8_t { Prefill, Decode };
inline constexpr int kPhaseCount = 2;
inline constexpr int kFormatCount = 6;

inline std::string_view phase_name(Phase phase) { return phase == Phase::Prefill ? "prefill" : "decode"; }

// Operation counts a cost model prices (engine/soc): bytes per tier and format, multiply-adds by
// the precision of the stored operand, and the work of the smaller kernels. Summed per call and
// reported once per call.
struct OpCounts {
  std::array<std::array<std::uint64_t, kFormatCount>, kTierCount> bytes_read{};
  std::array<std::array<std::uint64_t, kFormatCount>, kTierCount> bytes_written{};
  std::array<std::uint64_t, kFormatCount> macs{};
  std::uint64_t softmax_exps = 0;
  std::array<std::uint64_t, kFormatCount> quantized_values{};  // values sealed into pages, by format
  std::uint64_t bound_products = 0;  // Quest bounds: pages x q heads x head_dim
  std::uint64_t attention_calls = 0;
  std::uint64_t selections = 0;  // selection plans made (each with a fixed cost besides its products)
  std::uint64_t attention_queries = 0;
  // Decode calls: pages of the layer's context over kv heads, attended or not (selection
  // history and page views touch them all), and of those the ones an L1-capped pool manages
  // (importance, prediction, pressure).
  std::uint64_t context_pages = 0, managed_pages = 0;
  // L2 reads: pages a step had to load itself (it waited) and pages prefetched after it for
  // the next steps; L2 bytes read are their sum.
  std::uint64_t demand_pages = 0, demand_bytes = 0;
  std::uint64_t prefetch_pages = 0, prefetch_bytes = 0;
  // Of those loads, pages demoted less than one write batch before: still in memory.
  std::uint64_t demand_buffered = 0, prefetch_buffered = 0;
  // Waits for the device: acquisitions of a step's pages that loaded at least one page from it
  // (the loads of one acquisition go out together, so each is at least one round trip).
  std::uint64_t demand_waits = 0;
  std::uint64_t demoted_pages = 0;   // pages written to L2 during the call

  void read(Tier tier, Format format, std::uint64_t bytes) {
    bytes_read[static_cast<int>(tier)][static_cast<int>(format)] += bytes;
  }
  void write(Tier tier, Format format, std::uint64_t bytes) {
    bytes_written[static_cast<int>(tier)][static_cast<int>(format)] += bytes;
  }
  void mac(Format format, std::uint64_t count) { macs[static_cast<int>(format)] += count; }
  OpCounts& operator+=(const OpCounts& other);
};

// Counts times a factor, each rounded: the executed layers' counts stated for the whole model.
OpCounts scaled(const OpCounts& counts, double factor);

struct PageSealed {
  int layer = 0;
  int kv_head = 0;
  int logical_page = 0;
  Phase phase = Phase::Prefill;
  PageHealth health;
};

enum class KernelKind : std::uint8_t { Decode, Prefill };

// One sparse decode step of one layer: what was kept.
struct SelectionEvent {
  int step = 0;
  int layer = 0;
  int context_tokens = 0;
  int budget_pages = 0;
  std::vector<int> kept_tokens;  // per kv head
  // Importance-score histogram of the middle pages: each head's scores min-max normalised to
  // [0, 1], pooled over heads, kScoreBins equal bins.
  static constexpr int kScoreBins = 16;
  std::vector<int> score_histogram;
};

// A sampled step's quality against exact attention (sparse/sparse_decoder.h), per layer.
struct SelectionQuality {
  int step = 0;
  int layer = 0;
  double attn_mass_recall = 0.0;    // exact attention mass held by the kept tokens, mean over q heads
  double critical_miss_rate = 0.0;  // share of the exact top-m tokens that were dropped
  int needles = 0;                  // planted needles in the context
  int needles_kept = 0;             // of them, kept by every kv head
  // The step's attention output against exact attention over exact K/V (all tokens), mean
  // over q heads: ||o - o*|| / ||o*|| and cos(o, o*). Quantization and selection both count.
  double attn_rel_error = 0.0;
  double attn_cosine = 1.0;
  // The ceiling of attn_mass_recall at this step's page counts: the mass that the best choice of
  // as many pages per kv head would hold (its pages ranked by exact mass summed over its q
  // heads; sinks and window not forced), mean over q heads.
  double oracle_mass_recall = 0.0;
  // critical_miss_rate for the oracle's pages (as many per kv head as the selection kept).
  double oracle_critical_miss_rate = 0.0;
  // The images' share (a context with visual tokens): the exact attention mass on image tokens
  // that the kept tokens hold, over all the mass on image tokens (summed over q heads, so heads
  // that barely look at images weigh little); its ceiling, the image mass of each image's
  // heaviest pages, as many per kv head as the selection kept of that image; and the share of
  // image tokens not attended, mean over kv heads.
  bool has_images = false;
  double visual_mass_recall = 0.0;
  double visual_oracle_mass_recall = 0.0;
  double visual_token_drop = 0.0;
};

// Every span a phase's time is broken into (clock host): `total` is the phase's timed work,
// the others are its parts, except `quality`, which is measurement work done outside every
// timed region (exact attention checks, the reference model). The engine itself reports
// kv_quant, page_alloc and select; the harness adds the rest. Names are written here once:
// metrics are span_<phase>_<name>_ms.
enum class Span : std::uint8_t {
  Total,         // the phase's timed work
  AttnCompute,   // attention kernels (attention calls less selection and waits for pages)
  KvQuant,       // sealing pages: quantization and page summaries
  PageAlloc,     // allocating sealed pages (may demote under memory pressure)
  Select,        // sparse selection: page scores and the plan
  DmaWait,       // waiting for pages from L2
  ModelCompute,  // the model outside attention (llama backend)
  Quality,       // quality checks and reference model: never inside a timed figure
};
inline constexpr int kSpanCount = 8;
inline std::string_view span_name(Span span) {
  switch (span) {
    case Span::Total: return "total";
    case Span::AttnCompute: return "attn_compute";
    case Span::KvQuant: return "kv_quant";
    case Span::PageAlloc: return "page_alloc";
    case Span::Select: return "select";
    case Span::DmaWait: return "dma_wait";
    case Span::ModelCompute: return "model_compute";
    case Span::Quality: return "quality";
  }
  return "unknown";
}

// A critical token (exact top-m) that selection dropped: enough to trace a wrong answer back.
struct TokenDropped {
  int step = 0;
  int layer = 0;
  int q_head = 0;
  int position = 0;
  float weight = 0.0f;  // its exact attention weight
};

struct BudgetChange {
  int step = 0;
  float budget = 0.0f;   // fraction, or 0 when given in pages
  int budget_pages = 0;  // pages, or 0 when given as a fraction
  float from_budget = 0.0f;  // the budget before the change, likewise
  int from_budget_pages = 0;
};

class Telemetry {
 public:
  virtual ~Telemetry() = default;
  // One page quantized and sealed, with its quantization health.
  virtual void on_page_sealed(const PageSealed& event) = 0;
  // Non-finite inputs replaced by 0 (the documented rule) during an append.
  virtual void on_nan_inf(int layer, std::uint64_t count) = 0;
  // The kernel path that ran for one attention call.
  virtual void on_kernel(KernelKind kind, Isa isa) = 0;
  // Operation counts of one append or attention call.
  virtual void on_ops(Phase phase, const OpCounts& counts) = 0;
  // Sparse attention: a step's selection, and every run-time budget change.
  virtual void on_selection(const SelectionEvent& /*event*/) {}
  virtual void on_budget_change(const BudgetChange& /*change*/) {}
  virtual void on_selection_quality(const SelectionQuality& /*quality*/) {}
  virtual void on_token_dropped(const TokenDropped& /*drop*/) {}
  // Memory tiers: pressure transitions and faults, and one sample per attention call.
  virtual void on_memory_event(const MemoryEvent& /*event*/) {}
  virtual void on_memory_sample(const MemorySample& /*sample*/) {}
  // Wall time of one piece of engine work (reported only when a sink is set).
  virtual void on_span(Phase /*phase*/, Span /*span*/, std::uint64_t /*ns*/) {}
};

// Forwards operation counts only: a second cache whose work belongs in the step
// pricing but whose pages, selections and memory belong in no figure of the first (speculative
// decoding's draft copy of the context).
class OpsOnlyTelemetry final : public Telemetry {
 public:
  // factor: the counts are forwarded times it (a draft sampled at another share of its layers
  // than its target states its counts in the target's share).
  explicit OpsOnlyTelemetry(Telemetry* target, double factor = 1.0) : target_(target), factor_(factor) {}
  void on_page_sealed(const PageSealed& /*event*/) override {}
  void on_nan_inf(int /*layer*/, std::uint64_t /*count*/) override {}
  void on_kernel(KernelKind /*kind*/, Isa /*isa*/) override {}
  void on_ops(Phase phase, const OpCounts& counts) override { target_->on_ops(phase, scaled(counts, factor_)); }

 private:
  Telemetry* target_;
  double factor_;
};

// Forwards to another sink while open. Work whose events belong in no figure (a warm-up pass
// that fills the prefix cache before a measured repetition) runs with the gate closed.
class TelemetryGate final : public Telemetry {
 public:
  explicit TelemetryGate(Telemetry* target) : target_(target) {}
  // May be called while engine threads report (the migrator reports memory events).
  void set_open(bool open) { open_.store(open, std::memory_order_relaxed); }

  void on_page_sealed(const PageSealed& event) override {
    if (Telemetry* t = live()) t->on_page_sealed(event);
  }
  void on_nan_inf(int layer, std::uint64_t count) override {
    if (Telemetry* t = live()) t->on_nan_inf(layer, count);
  }
  void on_kernel(KernelKind kind, Isa isa) override {
    if (Telemetry* t = live()) t->on_kernel(kind, isa);
  }
  void on_ops(Phase phase, const OpCounts& counts) override {
    if (Telemetry* t = live()) t->on_ops(phase, counts);
  }
  void on_selection(const SelectionEvent& event) override {
    if (Telemetry* t = live()) t->on_selection(event);
  }
  void on_budget_change(const BudgetChange& change) override {
    if (Telemetry* t = live()) t->on_budget_change(change);
  }
  void on_selection_quality(const SelectionQuality& quality) override {
    if (Telemetry* t = live()) t->on_selection_quality(quality);
  }
  void on_token_dropped(const TokenDropped& drop) override {
    if (Telemetry* t = live()) t->on_token_dropped(drop);
  }
  void on_memory_event(const MemoryEvent& event) override {
    if (Telemetry* t = live()) t->on_memory_event(event);
  }
  void on_memory_sample(const MemorySample& sample) override {
    if (Telemetry* t = live()) t->on_memory_sample(sample);
  }
  void on_span(Phase phase, Span span, std::uint64_t ns) override {
    if (Telemetry* t = live()) t->on_span(phase, span, ns);
  }

 private:
  Telemetry* live() const { return open_.load(std::memory_order_relaxed) ? target_ : nullptr; }
  Telemetry* target_;
  std::atomic<bool> open_{true};
};

}  // namespace kv
