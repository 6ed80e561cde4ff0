#include "case_metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include <fmt/format.h>

#include "runtime/work_clock.h"

namespace kvbench {

namespace {

const char* const kPhases[] = {"prefill", "decode"};

// Records metrics by name; unit and clock come from the metric table.
class Builder {
 public:
  Builder(int repetition, bool noisy) : repetition_(repetition), noisy_(noisy) {}
  void value(const std::string& name, double v, bool extrapolated = false) {
    MetricRecord m = base(name);
    if (std::isfinite(v)) {
      m.value = v;
    } else {
      m.na_reason = "not finite (" + std::to_string(v) + ")";
    }
    m.extrapolated = extrapolated && m.value.has_value();
    out_.push_back(std::move(m));
  }
  void na(const std::string& name, const std::string& reason) {
    MetricRecord m = base(name);
    m.na_reason = reason;
    out_.push_back(std::move(m));
  }
  void maybe(const std::string& name, std::optional<double> v, const std::string& reason, bool extrapolated = false) {
    if (v) {
      value(name, *v, extrapolated);
    } else {
      na(name, reason);
    }
  }
  std::vector<MetricRecord> take() { return std::move(out_); }

 private:
  MetricRecord base(const std::string& name) const {
    const MetricDef& def = metric(name);
    MetricRecord m;
    m.repetition = repetition_;
    m.name = name;
    m.unit = def.unit;
    m.clock = def.clock;
    // The noise figures carry the mark too, so that tables can say which repetition was noisy.
    m.noisy = noisy_ && (contention_sensitive(def) || def.name.rfind("noise_", 0) == 0);
    return m;
  }
  int repetition_;
  bool noisy_;
  std::vector<MetricRecord> out_;
};

std::optional<double> scalar(const std::map<std::string, double>& scalars, const std::string& name) {
  const auto it = scalars.find(name);
  if (it == scalars.end()) return std::nullopt;
  return it->second;
}

// Why the synthetic backend's exact-attention figures are missing.
const std::string no_exact = "the llama backend keeps no exact K/V (its accuracy is ppl, kl_*, top1_agree)";
const std::string no_check = "no sampled decode step (sample_every exceeds the decode steps)";

// What every section of the contract reads.
struct Inputs {
  const RepetitionFacts& f;
  std::map<std::string, double> scalars;  // the recorder's
  bool scaled = false;                    // sampled layers: whole-model figures are the executed layers', scaled
  double layers = 1.0;                    // the scale
  bool prefill_extrapolated = false;      // scaled, or the prefill was probed
};

// Latency and throughput (host; synthetic: engine work of the sampled layers, scaled).
void add_latency(Builder& b, const Inputs& in) {
  const RepetitionFacts& f = in.f;
  const ExecutionResult& e = *in.f.execution;
  const bool scaled = in.scaled;
  const bool prefill_extrapolated = scaled || e.prefill_probed;
  b.maybe("ttft_ms",
          e.ttft_ms.empty() ? std::nullopt
                            : std::optional<double>(std::accumulate(e.ttft_ms.begin(), e.ttft_ms.end(), 0.0) /
                                                    static_cast<double>(e.ttft_ms.size())),
          "no prompt: teacher-forced scoring feeds one token per step", prefill_extrapolated);
  const TtftSplit split = split_ttft(e.ttft_ms);
  b.maybe("ttft_first_request_ms", split.first, "no prompt: teacher-forced scoring feeds one token per step", prefill_extrapolated);
  b.maybe("ttft_followup_ms_p50", split.followup_p50, e.ttft_ms.empty() ? "no prompt: teacher-forced scoring feeds one token per step"
                                                                        : "one request with a prompt: no follow-up",
          prefill_extrapolated);
  b.maybe("prefill_tps",
          e.prefill_tokens > 0 && e.prefill.total_ms > 0.0 ? std::optional<double>(e.prefill_tokens / (e.prefill.total_ms * 1e-3))
                                                           : std::nullopt,
          "no prefill phase", prefill_extrapolated);
  for (const auto& [name, p] : {std::pair{"tpot_ms_p50", 50.0}, {"tpot_ms_p90", 90.0}, {"tpot_ms_p99", 99.0}}) {
    b.maybe(name, e.tpot_ms.empty() ? std::nullopt : std::optional<double>(percentile(e.tpot_ms, p)), "no decode steps", scaled);
  }
  b.maybe("decode_tps",
          e.decode.total_ms > 0.0 ? std::optional<double>(e.decode_tokens / (e.decode.total_ms * 1e-3)) : std::nullopt,
          "no decode steps", scaled);
  if (f.synthetic) {
    b.na("goodput", "the synthetic backend runs no model compute: host time covers the engine only (a SoC cost model prices goodput)");
  } else if (e.ttft_ms.empty()) {
    b.na("goodput", "teacher-forced scoring has no requests");
  } else if (f.ttft_target_ms <= 0.0 && f.tpot_target_ms <= 0.0) {
    b.na("goodput", "the workload sets no ttft/tpot targets");
  } else {
    int met = 0;
    for (std::size_t i = 0; i < e.ttft_ms.size(); ++i) {
      bool ok = f.ttft_target_ms <= 0.0 || e.ttft_ms[i] <= f.ttft_target_ms;
      for (std::size_t j = 0; j < e.request_of_tpot.size(); ++j) {
        if (e.request_of_tpot[j] == e.request_of_ttft[i] && f.tpot_target_ms > 0.0 && e.request_tpot_ms[j] > f.tpot_target_ms) ok = false;
      }
      met += ok ? 1 : 0;
    }
    b.value("goodput", static_cast<double>(met) / static_cast<double>(e.ttft_ms.size()));
  }
}

// Requests that start a sequence after the first: what a prefix cache can speed up.
void add_sharing(Builder& b, const Inputs& in) {
  const RepetitionFacts& f = in.f;
  const ExecutionResult& e = *in.f.execution;
  const bool scaled = in.scaled;
  const double layers = in.layers;
  const bool prefill_extrapolated = in.prefill_extrapolated;
  const auto repeat_ttft = [&]() -> std::optional<double> {
    double sum = 0.0;
    int n = 0;
    for (std::size_t i = 0; i < e.ttft_ms.size(); ++i) {
      if (std::find(e.repeat_requests.begin(), e.repeat_requests.end(), e.request_of_ttft[i]) == e.repeat_requests.end()) continue;
      sum += e.ttft_ms[i];
      ++n;
    }
    if (n == 0) return std::nullopt;
    return sum / n;
  };
  b.maybe("ttft_first_turn_ms", e.sessions ? repeat_ttft() : std::nullopt, "not a roleplay workload with sessions >= 2",
          prefill_extrapolated);
  b.maybe("ttft_repeat_request_ms", e.sessions ? std::nullopt : repeat_ttft(), "not a rag workload with requests >= 2",
          prefill_extrapolated);
  if (f.prefix_cache) {
    std::uint64_t prompt = 0, hit = 0;
    for (std::size_t i = 0; i < e.prompt_tokens.size(); ++i) {
      prompt += static_cast<std::uint64_t>(e.prompt_tokens[i]);
      hit += static_cast<std::uint64_t>(e.prefix_hit_tokens[i]);
    }
    b.value("prefix_hit_tokens", static_cast<double>(hit));
    b.maybe("prefix_hit_rate", prompt > 0 ? std::optional<double>(static_cast<double>(hit) / static_cast<double>(prompt)) : std::nullopt,
            "no request looked a prefix up");
    b.value("prefix_cached_bytes", static_cast<double>(f.prefix.cached_bytes) * layers, scaled);
    b.value("prefix_evictions", static_cast<double>(f.prefix.evictions));
  } else {
    for (const char* name : {"prefix_hit_tokens", "prefix_hit_rate", "prefix_cached_bytes", "prefix_evictions"}) {
      b.na(name, "the policy's prefix_cache is off");
    }
  }
  if (e.speculation) {
    const SpeculationTotals& spec = *e.speculation;
    b.maybe("spec_accept_rate",
            spec.proposed > 0 ? std::optional<double>(static_cast<double>(spec.accepted) / static_cast<double>(spec.proposed)) : std::nullopt,
            "no verify step: every decode op was a single token");
    b.maybe("spec_tokens_per_step",
            spec.verify_steps > 0 ? std::optional<double>(static_cast<double>(spec.committed) / static_cast<double>(spec.verify_steps))
                                  : std::nullopt,
            "no verify step: every decode op was a single token");
    b.value("spec_draft_ms", spec.draft_ms, scaled);
    b.value("spec_verify_ms", spec.verify_ms, scaled);
    b.value("spec_draft_kv_bytes", static_cast<double>(spec.draft_peak_bytes) * layers, scaled);
  } else {
    for (const char* name : {"spec_accept_rate", "spec_tokens_per_step", "spec_draft_ms", "spec_verify_ms", "spec_draft_kv_bytes"}) {
      b.na(name, "the policy has no speculative decoding");
    }
  }
}

// Memory: L0 is a per-step staging arena; L1 and L2 hold the executed layers, reported for
// the whole model; kv bytes per token cover the whole model.
void add_memory(Builder& b, const Inputs& in) {
  const RepetitionFacts& f = in.f;
  const kv::MemoryStats& mem = in.f.cache.memory;
  const bool scaled = in.scaled;
  const double layers = in.layers;
  b.value("peak_l0_bytes", static_cast<double>(mem.peak_l0_bytes));
  b.value("peak_l1_bytes", static_cast<double>(mem.peak_l1_bytes) * layers, scaled);
  b.value("peak_l2_bytes", static_cast<double>(mem.peak_l2_bytes) * layers, scaled);
  b.maybe("peak_rss_bytes", f.peak_rss_bytes > 0 ? std::optional<double>(static_cast<double>(f.peak_rss_bytes)) : std::nullopt,
          "the kernel refused to reset or report the peak RSS");
  const double per_token = static_cast<double>(f.layout->bytes) / f.layout->page_tokens * f.kv_heads * f.model_layers;
  const double f16_per_token = static_cast<double>(f.f16_layout->bytes) / f.f16_layout->page_tokens * f.kv_heads * f.model_layers;
  b.value("kv_bytes_per_token", per_token);
  b.value("kv_compression_ratio", f16_per_token / per_token);
  // Only a visual block stores an image's whole pages in the visual layout; a page it shares
  // with text is a text page.
  const double whole_pages = f.visual_pool && f.visual_layout->bytes != f.layout->bytes ? f.image_whole_pages : 0.0;
  const double image_page_bytes = whole_pages * static_cast<double>(f.visual_layout->bytes) +
                                  (f.image_pages - whole_pages) * static_cast<double>(f.layout->bytes);
  b.maybe("visual_kv_bytes_per_image",
          f.has_images ? std::optional<double>(image_page_bytes * f.kv_heads * f.model_layers) : std::nullopt,
          "the workload has no images");
  // Only a visual block tells the pool which pages are an image's (KVCache::add_image).
  b.maybe("visual_pages_resident",
          f.has_images && f.visual_pool && mem.decode_steps > 0
              ? std::optional<double>(static_cast<double>(mem.read_only_resident_sum) / static_cast<double>(mem.decode_steps) * layers)
              : std::nullopt,
          !f.has_images  ? "the workload has no images"
          : !f.visual_pool ? "the policy has no visual block: image pages are not told apart"
                           : "no decode step",
          scaled);
}

// Offload.
void add_offload(Builder& b, const Inputs& in) {
  const RepetitionFacts& f = in.f;
  const ExecutionResult& e = *in.f.execution;
  const kv::MemoryStats& mem = in.f.cache.memory;
  const bool scaled = in.scaled;
  const double layers = in.layers;
  const std::string no_l2 = "no offload: the policy has no L1 cap and no L2 tier";
  const auto l2 = [&](double v) { return mem.l2_enabled ? std::optional<double>(v) : std::nullopt; };
  b.maybe("swap_in_bytes", l2(static_cast<double>(mem.swap_in_bytes) * layers), no_l2, scaled);
  b.maybe("swap_out_bytes", l2(static_cast<double>(mem.swap_out_bytes) * layers), no_l2, scaled);
  b.maybe("l2_bytes_written", l2(static_cast<double>(mem.l2_bytes_written) * layers), no_l2, scaled);
  b.maybe("l2_compaction_bytes", l2(static_cast<double>(mem.l2_compaction_bytes) * layers), no_l2, scaled);
  b.maybe("swap_in_gb_per_s", mem.l2_enabled && mem.l2_read_ns > 0 ? std::optional<double>(mem.swap_in_gb_per_s()) : std::nullopt,
          !mem.l2_enabled           ? no_l2
          : mem.swap_in_bytes > 0 ? "no device read was timed: the pages came from L2's write buffers"
                                  : "no page was read from L2");
  b.maybe("swap_out_gb_per_s", mem.l2_enabled && mem.l2_write_ns > 0 ? std::optional<double>(mem.swap_out_gb_per_s()) : std::nullopt,
          !mem.l2_enabled            ? no_l2
          : mem.swap_out_bytes > 0 ? "no device write was timed: the demoted pages still sit in L2's write buffers"
                                   : "no page was written to L2");
  b.maybe("prefetch_hit_rate",
          mem.l2_enabled && mem.prefetch_hits + mem.demand_loads > 0 ? std::optional<double>(mem.prefetch_hit_rate()) : std::nullopt,
          mem.l2_enabled ? "no step needed a page from L2" : no_l2);
  b.maybe("l1_cache_hit_rate", mem.l2_enabled && mem.cold_reads > 0 ? std::optional<double>(mem.l1_cache_hit_rate()) : std::nullopt,
          mem.l2_enabled ? "no step read a page with an L2 copy" : no_l2);
  b.maybe("l1_cache_hit_rate_decode",
          mem.l2_enabled && mem.decode_cold_reads > 0 ? std::optional<double>(mem.l1_cache_hit_rate_decode()) : std::nullopt,
          mem.l2_enabled ? "no decode step read a page with an L2 copy" : no_l2);
  b.maybe("write_amplification",
          mem.l2_enabled && mem.l2_flushed_page_bytes > 0 ? std::optional<double>(mem.write_amplification()) : std::nullopt,
          !mem.l2_enabled            ? no_l2
          : mem.swap_out_bytes > 0 ? "no batch of demoted pages reached the L2 device (they sit in its write buffers)"
                                   : "nothing was written to L2");
  b.maybe("dma_wait_ms", l2(static_cast<double>(mem.dma_wait_ns) * 1e-6 * layers), no_l2, scaled);
  b.maybe("prefetch_bytes", l2(static_cast<double>(mem.prefetch_bytes) * layers), no_l2, scaled);
  b.maybe("prefetch_unused_bytes", l2(static_cast<double>(mem.prefetch_unused_bytes) * layers), no_l2, scaled);
  b.maybe("selection_shifts", l2(f.recorder->counter("selection_shifts") * layers), no_l2, scaled);
  b.maybe("selection_shift_loads", l2(f.recorder->counter("selection_shift_loads") * layers), no_l2, scaled);
  // By decode phase: the first step after each prefill, and the steps after it.
  const bool first_ran = mem.first_step_pages > 0;
  const std::string no_first = mem.l2_enabled ? "no decode step followed a prefill" : no_l2;
  const auto first = [&](double v) { return mem.l2_enabled && first_ran ? std::optional<double>(v) : std::nullopt; };
  b.maybe("first_step_pages_read", first(static_cast<double>(mem.first_step_pages) * layers), no_first, scaled);
  b.maybe("first_step_demand_loads", first(static_cast<double>(mem.first_step_demand_loads) * layers), no_first, scaled);
  b.maybe("first_step_dma_wait_ms", first(static_cast<double>(mem.first_step_dma_wait_ns) * 1e-6 * layers), no_first, scaled);
  const bool later_needed = mem.later_prefetch_hits + mem.later_demand_loads > 0;
  const std::string no_later = !mem.l2_enabled ? no_l2 : "no decode step after the first needed a page from L2";
  b.maybe("prefetch_hit_rate_after_first", mem.l2_enabled && later_needed ? std::optional<double>(mem.prefetch_hit_rate_after_first()) : std::nullopt,
          no_later);
  b.maybe("prefetch_hit_rate_predictable",
          mem.l2_enabled && mem.later_prefetch_hits + mem.later_demand_loads > mem.later_unpredictable_loads
              ? std::optional<double>(mem.prefetch_hit_rate_predictable())
              : std::nullopt,
          mem.l2_enabled && later_needed ? "every page a later step loaded was unpredictable" : no_later);
  const std::string no_next = !mem.l2_enabled ? no_l2 : "no decode step of a layer with a next executed one changed its selection (one executed layer, or a steady selection)";
  b.maybe("next_layer_agreement",
          mem.l2_enabled && mem.next_layer_offered > 0
              ? std::optional<double>(static_cast<double>(mem.next_layer_read) / static_cast<double>(mem.next_layer_offered))
              : std::nullopt,
          no_next);
  b.maybe("next_layer_predicted_pages", l2(static_cast<double>(mem.next_layer_predicted) * layers), no_l2, scaled);
  b.maybe("dma_wait_after_first_ms", l2(static_cast<double>(mem.later_dma_wait_ns) * 1e-6 * layers), no_l2, scaled);
  // I/O shape (timing-dependent: what is queued together is read together).
  b.maybe("l2_read_ios", l2(static_cast<double>(mem.l2_read_ios) * layers), no_l2, scaled);
  b.maybe("l2_bytes_per_read_io",
          mem.l2_read_ios > 0 ? std::optional<double>(static_cast<double>(mem.l2_device_bytes_read) / static_cast<double>(mem.l2_read_ios))
                              : std::nullopt,
          mem.l2_enabled ? "nothing was read from the L2 device" : no_l2);
  b.maybe("l2_read_ios_per_decode_step",
          mem.l2_enabled && e.decode_tokens > 0 ? std::optional<double>(static_cast<double>(mem.decode_read_ios) * layers / e.decode_tokens)
                                                : std::nullopt,
          mem.l2_enabled ? "no decode step ran" : no_l2, scaled);
  b.maybe("summary_index_bytes", mem.l1_capacity_bytes > 0 ? std::optional<double>(static_cast<double>(mem.summary_index_bytes) * layers) : std::nullopt,
          "no L1 cap: the page-summary index is not accounted", scaled);
}

// Selection (the decoder runs every policy, full included).
void add_selection(Builder& b, const Inputs& in) {
  const RepetitionFacts& f = in.f;
  const std::map<std::string, double>& s = in.scalars;
  b.value("token_drop_ratio", f.token_drop_ratio);
  for (const char* name : {"attn_mass_recall", "oracle_mass_recall", "critical_miss_rate", "oracle_critical_miss_rate"}) {
    b.maybe(name, f.synthetic ? scalar(s, name) : std::nullopt, f.synthetic ? no_check : no_exact);
  }
  const bool images = f.synthetic && f.has_images;
  for (const char* name : {"visual_attn_mass_recall", "visual_oracle_mass_recall", "visual_token_drop"}) {
    b.maybe(name, images ? scalar(s, name) : std::nullopt,
            !f.synthetic ? no_exact : !images ? "the workload has no images" : no_check);
  }
  b.maybe("needle_recall", f.has_needles ? scalar(s, "needle_recall") : std::nullopt,
          !f.has_needles ? (f.synthetic ? "the workload plants no needles" : "real text has no planted needles")
                         : "no sampled step asked for a needle");
}

// Quantization health.
void add_health(Builder& b, const Inputs& in) {
  const RepetitionFacts& f = in.f;
  const std::map<std::string, double>& s = in.scalars;
  const std::string no_health = "no sealed page had reference scales (an unscaled format, or no prefill calibration)";
  for (const char* name : {"scale_drift_mean", "scale_drift_max", "outlier_channel_ratio", "clip_ratio"}) {
    b.maybe(name, scalar(s, name), no_health);
  }
  b.value("nan_inf_count", f.recorder->counter("nan_inf_count"));
  for (const char* name : {"attn_rel_error", "attn_cosine"}) {
    b.maybe(name, f.synthetic ? scalar(s, name) : std::nullopt, f.synthetic ? no_check : no_exact);
  }
}

// Degradation: what the engine gave up to keep running.
void add_degradation(Builder& b, const Inputs& in) {
  const RepetitionFacts& f = in.f;
  const kv::MemoryStats& mem = in.f.cache.memory;
  const bool scaled = in.scaled;
  const double layers = in.layers;
  b.value("l2_errors", f.recorder->counter("l2_errors"));
  b.value("pressure_danger_steps", f.recorder->counter("pressure_danger_steps"));
  b.value("requantized_pages", static_cast<double>(mem.requantized_pages) * layers, scaled && mem.requantized_pages > 0);
  b.value("l1_overflow_events", f.recorder->counter("l1_overflow_events"));
}

// Noise.
void add_noise(Builder& b, const Inputs& in) {
  const RepetitionFacts& f = in.f;
  b.maybe("noise_cpu_share", f.noise.cpu_share,
          fmt::format("the repetition spans {} ticks of /proc/stat over all cores, too few for a share (at least {})",
                      f.noise.cpu_ticks, kMinNoiseTicks));
  b.value("noise_loadavg", f.noise.loadavg);
  const std::string no_schedstat = "this kernel keeps no run-queue statistics (/proc/self/task/*/schedstat)";
  b.maybe("noise_run_queue_ms", f.noise.run_queue_ms, no_schedstat);
  b.maybe("noise_run_queue_share", f.noise.run_queue_share, no_schedstat);
  b.maybe("noise_cpu_probe_ms", f.cpu_probe_ms > 0.0 ? std::optional<double>(f.cpu_probe_ms) : std::nullopt,
          "the core-speed probe did not run");
}

// The device's clock, temperature and throttling around the script.
void add_device(Builder& b, const Inputs& in) {
  const DeviceConditions& d = in.f.device;
  b.maybe("device_freq_mhz_start", d.start.freq_mhz, d.start.no_freq);
  b.maybe("device_freq_mhz_end", d.end.freq_mhz, d.end.no_freq);
  b.maybe("device_temp_c_start", d.start.hottest_c, d.start.no_thermal);
  b.maybe("device_temp_c_end", d.end.hottest_c, d.end.no_thermal);
  const std::optional<std::uint64_t> throttled = d.throttle_events();
  b.maybe("device_throttle_events", throttled ? std::optional<double>(static_cast<double>(*throttled)) : std::nullopt,
          d.start.throttle_count ? d.end.no_throttle : d.start.no_throttle);
}

// Real-model accuracy.
void add_accuracy(Builder& b, const Inputs& in) {
  const RepetitionFacts& f = in.f;
  const ExecutionResult& e = *in.f.execution;
  for (const std::string& name : llama_metric_names()) {
    if (!e.accuracy || e.accuracy->predictions == 0) {
      b.na(name, f.synthetic ? "the synthetic backend has no real model" : "no scored position");
      continue;
    }
    const AccuracyReport& a = *e.accuracy;
    const double v = name == "ppl"             ? a.ppl
                     : name == "ppl_delta_pct" ? a.ppl_delta_pct
                     : name == "kl_mean"       ? a.kl_mean
                     : name == "kl_p99"        ? a.kl_p99
                     : name == "kl_max"        ? a.kl_max
                     : name == "top1_agree"    ? a.top1_agree
                                               : a.dp_rms;
    b.value(name, v);
  }
}

// Spans (host): the phase's timed work and its parts, and the untimed quality work.
void add_spans(Builder& b, const Inputs& in) {
  const RepetitionFacts& f = in.f;
  const ExecutionResult& e = *in.f.execution;
  const std::map<std::string, double>& s = in.scalars;
  const bool scaled = in.scaled;
  const double layers = in.layers;
  for (int phase = 0; phase < kv::kPhaseCount; ++phase) {
    const PhaseTimes& t = phase == 0 ? e.prefill : e.decode;
    const bool ran = phase == 0 ? e.prefill_tokens > 0 : e.decode_tokens > 0;
    const bool extrapolated = scaled || (phase == 0 && e.prefill_probed);
    const auto engine = [&](kv::Span span) {
      return scalar(s, span_metric_name(kPhases[phase], kv::span_name(span))).value_or(0.0) * layers;
    };
    for (int i = 0; i < kv::kSpanCount; ++i) {
      const auto span = static_cast<kv::Span>(i);
      const std::string name = span_metric_name(kPhases[phase], kv::span_name(span));
      if (!ran) {
        b.na(name, std::string("no ") + kPhases[phase] + " phase");
        continue;
      }
      switch (span) {
        case kv::Span::Total: b.value(name, t.total_ms, extrapolated); break;
        case kv::Span::AttnCompute:
          b.value(name, std::max(0.0, t.attend_ms - engine(kv::Span::Select) - t.dma_wait_ms), extrapolated);
          break;
        case kv::Span::KvQuant:
        case kv::Span::PageAlloc:
        case kv::Span::Select: b.value(name, engine(span), scaled); break;
        case kv::Span::DmaWait: b.value(name, t.dma_wait_ms, scaled); break;
        case kv::Span::ModelCompute:
          if (f.synthetic) {
            b.na(name, "the synthetic generator stands in for model compute (a SoC cost model prices it)");
          } else {
            b.value(name, t.model_ms);
          }
          break;
        case kv::Span::Quality: b.value(name, t.quality_ms); break;
      }
    }
  }
}

// The engine threads' work per span (clock cpu).
void add_cpu_spans(Builder& b, const Inputs& in) {
  const RepetitionFacts& f = in.f;
  const ExecutionResult& e = *in.f.execution;
  const bool scaled = in.scaled;
  for (int phase = 0; phase < kv::kPhaseCount; ++phase) {
    const PhaseTimes& t = phase == 0 ? e.prefill : e.decode;
    const bool ran = phase == 0 ? e.prefill_tokens > 0 : e.decode_tokens > 0;
    const bool extrapolated = scaled || (phase == 0 && e.prefill_probed);
    for (const char* part : kWorkSpans) {
      const std::string cpu = span_cpu_metric_name(kPhases[phase], part);
      const std::string instructions = span_instructions_metric_name(kPhases[phase], part);
      const std::string which(part);
      const SpanWork& w = which == "total" ? t.total_work : which == "attend" ? t.attend_work : which == "append" ? t.append_work : t.model_work;
      std::string reason;
      if (!ran) reason = std::string("no ") + kPhases[phase] + " phase";
      if (reason.empty() && which == "model_compute" && f.synthetic)
        reason = "the synthetic generator stands in for model compute (a SoC cost model prices it)";
      if (!reason.empty()) {
        b.na(cpu, reason);
        b.na(instructions, reason);
        continue;
      }
      b.value(cpu, w.cpu_ms, extrapolated);
      if (kv::instructions_counted()) {
        b.value(instructions, w.instructions, extrapolated);
      } else {
        b.na(instructions, kv::instructions_unavailable_reason());
      }
    }
  }
}

}  // namespace

TtftSplit split_ttft(const std::vector<double>& per_request) {
  TtftSplit split;
  if (per_request.empty()) return split;
  split.first = per_request.front();
  if (per_request.size() > 1) split.followup_p50 = percentile(std::vector<double>(per_request.begin() + 1, per_request.end()), 50.0);
  return split;
}

double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
  return values[std::clamp<std::size_t>(rank, 1, values.size()) - 1];
}

const std::vector<std::string>& contract_metric_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const MetricDef& d : metric_table()) {
      // case_wall_ms is the runner's, the sim clock's figures a sim run's (sim/sim_metrics.h).
      if (d.name != "case_wall_ms" && d.clock != Clock::Sim) n.push_back(d.name);
    }
    return n;
  }();
  return names;
}

const std::vector<std::string>& llama_metric_names() {
  static const std::vector<std::string> names = {"ppl", "ppl_delta_pct", "kl_mean", "kl_p99", "kl_max", "top1_agree", "dp_rms"};
  return names;
}

std::vector<MetricRecord> contract_metrics(const RepetitionFacts& f, int repetition) {
  const ExecutionResult& e = *f.execution;
  Inputs in{f, f.recorder->scalars(), e.layer_scale != 1.0, e.layer_scale, e.layer_scale != 1.0 || e.prefill_probed};
  Builder b(repetition, f.noisy);
  add_latency(b, in);
  add_sharing(b, in);
  add_memory(b, in);
  add_offload(b, in);
  add_selection(b, in);
  add_health(b, in);
  add_degradation(b, in);
  add_noise(b, in);
  add_device(b, in);
  add_accuracy(b, in);
  add_spans(b, in);
  add_cpu_spans(b, in);
  return b.take();
}

}  // namespace kvbench
