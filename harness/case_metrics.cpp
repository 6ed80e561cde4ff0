#include "case_metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

namespace kvbench {

namespace {

const char* const kPhases[] = {"prefill", "decode"};
const char* const kSpanNames[] = {"total", "attn_compute", "kv_quant", "page_alloc", "select", "dma_wait", "model_compute"};

class Builder {
 public:
  Builder(int repetition, bool noisy) : repetition_(repetition), noisy_(noisy) {}
  void value(const std::string& name, double v, const char* unit, Clock clock, bool extrapolated = false) {
    MetricRecord m = base(name, unit, clock);
    if (std::isfinite(v)) {
      m.value = v;
    } else {
      m.na_reason = "not finite (" + std::to_string(v) + ")";
    }
    m.extrapolated = extrapolated;
    out_.push_back(std::move(m));
  }
  void na(const std::string& name, const std::string& reason, const char* unit, Clock clock) {
    MetricRecord m = base(name, unit, clock);
    m.na_reason = reason;
    out_.push_back(std::move(m));
  }
  void maybe(const std::string& name, std::optional<double> v, const std::string& reason, const char* unit, Clock clock,
             bool extrapolated = false) {
    if (v) {
      value(name, *v, unit, clock, extrapolated);
    } else {
      na(name, reason, unit, clock);
    }
  }
  std::vector<MetricRecord> take() { return std::move(out_); }

 private:
  MetricRecord base(const std::string& name, const char* unit, Clock clock) const {
    MetricRecord m;
    m.repetition = repetition_;
    m.name = name;
    m.unit = unit;
    m.clock = clock;
    m.noisy = noisy_ && clock == Clock::Host;
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

}  // namespace

double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
  return values[std::clamp<std::size_t>(rank, 1, values.size()) - 1];
}

const std::vector<std::string>& contract_metric_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n = {"ttft_ms", "tpot_ms_p50", "tpot_ms_p90", "tpot_ms_p99", "decode_tps", "goodput",
                                  "peak_l0_bytes", "peak_l1_bytes", "peak_l2_bytes", "peak_rss_bytes",
                                  "kv_bytes_per_token", "kv_compression_ratio", "swap_in_bytes", "swap_out_bytes",
                                  "l2_bytes_written", "swap_in_gb_per_s", "swap_out_gb_per_s", "prefetch_hit_rate",
                                  "l1_cache_hit_rate", "write_amplification", "dma_wait_ms", "token_drop_ratio",
                                  "attn_mass_recall", "oracle_mass_recall", "critical_miss_rate", "needle_recall", "scale_drift_mean",
                                  "scale_drift_max", "outlier_channel_ratio", "clip_ratio", "nan_inf_count",
                                  "attn_rel_error", "attn_cosine", "noise_cpu_share", "noise_loadavg"};
    for (const std::string& m : llama_metric_names()) n.push_back(m);
    for (const char* phase : kPhases) {
      for (const char* span : kSpanNames) n.push_back(std::string("span_") + phase + "_" + span + "_ms");
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
  const std::map<std::string, double> s = f.recorder->scalars();
  const kv::MemoryStats& mem = f.cache.memory;
  Builder b(repetition, f.noisy);
  const bool scaled = e.layer_scale != 1.0;

  // Latency and throughput (host; synthetic: engine work of the sampled layers, scaled).
  b.maybe("ttft_ms",
          e.ttft_ms.empty() ? std::nullopt
                            : std::optional<double>(std::accumulate(e.ttft_ms.begin(), e.ttft_ms.end(), 0.0) /
                                                    static_cast<double>(e.ttft_ms.size())),
          "no prompt: teacher-forced scoring feeds one token per step", "ms", Clock::Host, scaled || e.prefill_probed);
  for (const auto& [name, p] : {std::pair{"tpot_ms_p50", 50.0}, {"tpot_ms_p90", 90.0}, {"tpot_ms_p99", 99.0}}) {
    b.maybe(name, e.tpot_ms.empty() ? std::nullopt : std::optional<double>(percentile(e.tpot_ms, p)), "no decode steps", "ms",
            Clock::Host, scaled);
  }
  b.maybe("decode_tps",
          e.decode.total_ms > 0.0 ? std::optional<double>(e.decode_tokens / (e.decode.total_ms * 1e-3)) : std::nullopt,
          "no decode steps", "tokens/s", Clock::Host, scaled);
  if (f.synthetic) {
    b.na("goodput", "the synthetic backend runs no model compute: host time covers the engine only (a SoC cost model prices goodput)",
         "ratio", Clock::Host);
  } else if (e.ttft_ms.empty()) {
    b.na("goodput", "teacher-forced scoring has no requests", "ratio", Clock::Host);
  } else if (f.ttft_target_ms <= 0.0 && f.tpot_target_ms <= 0.0) {
    b.na("goodput", "the workload sets no ttft/tpot targets", "ratio", Clock::Host);
  } else {
    int met = 0;
    for (std::size_t i = 0; i < e.ttft_ms.size(); ++i) {
      bool ok = f.ttft_target_ms <= 0.0 || e.ttft_ms[i] <= f.ttft_target_ms;
      for (std::size_t j = 0; j < e.request_of_tpot.size(); ++j) {
        if (e.request_of_tpot[j] == e.request_of_ttft[i] && f.tpot_target_ms > 0.0 && e.request_tpot_ms[j] > f.tpot_target_ms) ok = false;
      }
      met += ok ? 1 : 0;
    }
    b.value("goodput", static_cast<double>(met) / static_cast<double>(e.ttft_ms.size()), "ratio", Clock::Host);
  }

  // Memory: tiers hold the executed layers; kv bytes per token cover the whole model.
  b.value("peak_l0_bytes", static_cast<double>(mem.peak_l0_bytes), "bytes", Clock::Exact);
  b.value("peak_l1_bytes", static_cast<double>(mem.peak_l1_bytes), "bytes", Clock::Exact);
  b.value("peak_l2_bytes", static_cast<double>(mem.peak_l2_bytes), "bytes", Clock::Exact);
  b.maybe("peak_rss_bytes", f.peak_rss_bytes > 0 ? std::optional<double>(static_cast<double>(f.peak_rss_bytes)) : std::nullopt,
          "the kernel refused to reset or report the peak RSS", "bytes", Clock::Host);
  const double per_token = static_cast<double>(f.layout->bytes) / f.layout->page_tokens * f.kv_heads * f.model_layers;
  const double f16_per_token = static_cast<double>(f.f16_layout->bytes) / f.f16_layout->page_tokens * f.kv_heads * f.model_layers;
  b.value("kv_bytes_per_token", per_token, "bytes", Clock::Exact);
  b.value("kv_compression_ratio", f16_per_token / per_token, "ratio", Clock::Exact);

  // Offload.
  const std::string no_l2 = "no offload: the policy has no L1 cap and no L2 tier";
  const auto l2 = [&](double v) { return mem.l2_enabled ? std::optional<double>(v) : std::nullopt; };
  b.maybe("swap_in_bytes", l2(static_cast<double>(mem.swap_in_bytes)), no_l2, "bytes", Clock::Exact);
  b.maybe("swap_out_bytes", l2(static_cast<double>(mem.swap_out_bytes)), no_l2, "bytes", Clock::Exact);
  b.maybe("l2_bytes_written", l2(static_cast<double>(mem.l2_bytes_written)), no_l2, "bytes", Clock::Exact);
  b.maybe("swap_in_gb_per_s", mem.l2_enabled && mem.l2_read_ns > 0 ? std::optional<double>(mem.swap_in_gb_per_s()) : std::nullopt,
          !mem.l2_enabled           ? no_l2
          : mem.swap_in_bytes > 0 ? "no device read was timed: the pages came from L2's write buffers"
                                  : "no page was read from L2",
          "GB/s", Clock::Host);
  b.maybe("swap_out_gb_per_s", mem.l2_enabled && mem.l2_write_ns > 0 ? std::optional<double>(mem.swap_out_gb_per_s()) : std::nullopt,
          !mem.l2_enabled            ? no_l2
          : mem.swap_out_bytes > 0 ? "no device write was timed: the demoted pages still sit in L2's write buffers"
                                   : "no page was written to L2",
          "GB/s", Clock::Host);
  b.maybe("prefetch_hit_rate",
          mem.l2_enabled && mem.prefetch_hits + mem.demand_loads > 0 ? std::optional<double>(mem.prefetch_hit_rate()) : std::nullopt,
          mem.l2_enabled ? "no step needed a page from L2" : no_l2, "ratio", Clock::Exact);
  b.maybe("l1_cache_hit_rate", mem.l2_enabled && mem.cold_reads > 0 ? std::optional<double>(mem.l1_cache_hit_rate()) : std::nullopt,
          mem.l2_enabled ? "no step read a page with an L2 copy" : no_l2, "ratio", Clock::Exact);
  b.maybe("write_amplification", mem.l2_enabled && mem.swap_out_bytes > 0 ? std::optional<double>(mem.write_amplification()) : std::nullopt,
          mem.l2_enabled ? "no page was demoted" : no_l2, "ratio", Clock::Exact);
  b.maybe("dma_wait_ms", l2(static_cast<double>(mem.dma_wait_ns) * 1e-6 * e.layer_scale), no_l2, "ms", Clock::Host, scaled);

  // Selection (the decoder runs every policy, full included).
  b.value("token_drop_ratio", f.token_drop_ratio, "ratio", Clock::Exact);
  const std::string no_exact = "the llama backend keeps no exact K/V (its accuracy is ppl, kl_*, top1_agree)";
  const std::string no_check = "no sampled decode step (sample_every exceeds the decode steps)";
  for (const char* name : {"attn_mass_recall", "oracle_mass_recall", "critical_miss_rate", "attn_rel_error", "attn_cosine"}) {
    b.maybe(name, f.synthetic ? scalar(s, name) : std::nullopt, f.synthetic ? no_check : no_exact, "ratio", Clock::Exact);
  }
  b.maybe("needle_recall", f.has_needles ? scalar(s, "needle_recall") : std::nullopt,
          !f.has_needles ? (f.synthetic ? "the workload plants no needles" : "real text has no planted needles")
                         : "no sampled step asked for a needle",
          "ratio", Clock::Exact);

  // Quantization health.
  const std::string no_health = "no sealed page had reference scales (an unscaled format, or no prefill calibration)";
  for (const char* name : {"scale_drift_mean", "scale_drift_max", "outlier_channel_ratio", "clip_ratio"}) {
    b.maybe(name, scalar(s, name), no_health, "ratio", Clock::Exact);
  }
  b.value("nan_inf_count", f.recorder->counter("nan_inf_count"), "count", Clock::Exact);

  // Noise.
  b.value("noise_cpu_share", f.noise.cpu_share, "ratio", Clock::Host);
  b.value("noise_loadavg", f.noise.loadavg, "load", Clock::Host);

  // Real-model accuracy.
  for (const std::string& name : llama_metric_names()) {
    if (!e.accuracy || e.accuracy->predictions == 0) {
      b.na(name, f.synthetic ? "the synthetic backend has no real model" : "no scored position", "", Clock::Exact);
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
    b.value(name, v, name == "ppl" ? "ppl" : name == "ppl_delta_pct" ? "%" : name == "top1_agree" ? "ratio" : name == "dp_rms" ? "prob" : "nats",
            Clock::Exact);
  }

  // Spans (host): the phase's timed work and its parts.
  for (int phase = 0; phase < 2; ++phase) {
    const PhaseTimes& t = phase == 0 ? e.prefill : e.decode;
    const bool ran = phase == 0 ? e.prefill_tokens > 0 : e.decode_tokens > 0;
    const std::string prefix = std::string("span_") + kPhases[phase] + "_";
    const bool extrapolated = scaled || (phase == 0 && e.prefill_probed);
    const auto engine = [&](const char* name) { return scalar(s, prefix + name + "_ms").value_or(0.0) * e.layer_scale; };
    const double select = engine("select");
    for (const char* span : kSpanNames) {
      const std::string name = prefix + span + "_ms";
      if (!ran) {
        b.na(name, std::string("no ") + kPhases[phase] + " phase", "ms", Clock::Host);
        continue;
      }
      const std::string which = span;
      if (which == "total") {
        b.value(name, t.total_ms, "ms", Clock::Host, extrapolated);
      } else if (which == "attn_compute") {
        b.value(name, std::max(0.0, t.attend_ms - select - t.dma_wait_ms), "ms", Clock::Host, extrapolated);
      } else if (which == "kv_quant" || which == "page_alloc" || which == "select") {
        b.value(name, engine(span), "ms", Clock::Host, scaled);
      } else if (which == "dma_wait") {
        b.value(name, t.dma_wait_ms, "ms", Clock::Host, scaled);
      } else if (f.synthetic) {
        b.na(name, "the synthetic generator stands in for model compute (a SoC cost model prices it)", "ms", Clock::Host);
      } else {
        b.value(name, t.model_ms, "ms", Clock::Host);
      }
    }
  }
  return b.take();
}

}  // namespace kvbench
