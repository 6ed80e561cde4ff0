#include "case_pricing.h"

#include <cmath>

#include "attention/paged_attention.h"
#include "case_metrics.h"
#include "metric_table.h"

namespace kvbench {

namespace {

using kv::OpCounts;

std::uint64_t times(std::uint64_t v, double factor) { return static_cast<std::uint64_t>(std::llround(static_cast<double>(v) * factor)); }

double blocks(int queries) { return kv::page_passes(queries); }

// Causal query-key pairs of `queries` queries ending at `context`, as the engine counts them.
double pairs(int queries, int context) { return static_cast<double>(queries) * (2.0 * context - queries + 1) / 2.0; }

// The attention part of a chunk of `queries` queries at `context`, from an attended reference.
OpCounts complete(const OpCounts& ref, int ref_queries, int ref_context, int queries, int context) {
  const double work = pairs(queries, context) / pairs(ref_queries, ref_context);
  const double passes = blocks(queries) / blocks(ref_queries);
  const double reads = passes * static_cast<double>(context) / ref_context;
  OpCounts out;
  for (int f = 0; f < kv::kFormatCount; ++f) {
    out.macs[f] = times(ref.macs[f], work);
    for (int t = 0; t < 2; ++t) {  // L0 and L1: the pages every query block reads and stages
      out.bytes_read[t][f] = times(ref.bytes_read[t][f], reads);
      out.bytes_written[t][f] = times(ref.bytes_written[t][f], reads);
    }
  }
  out.softmax_exps = times(ref.softmax_exps, work);
  out.bound_products = times(ref.bound_products, static_cast<double>(context) / ref_context);
  // The measured prefill pays a call per probed block; so does its completion.
  out.attention_calls = times(ref.attention_calls, passes);
  out.selections = ref.selections;  // one plan per chunk and layer
  out.attention_queries = times(ref.attention_queries, static_cast<double>(queries) / ref_queries);
  return out;
}

class Records {
 public:
  explicit Records(int repetition) : repetition_(repetition) {}
  void value(const std::string& name, double v, bool extrapolated) {
    MetricRecord m = base(name);
    if (std::isfinite(v)) {
      m.value = v;
      m.extrapolated = extrapolated;
    } else {
      m.na_reason = "not finite";
    }
    out_.push_back(std::move(m));
  }
  void na(const std::string& name, const std::string& reason) {
    MetricRecord m = base(name);
    m.na_reason = reason;
    out_.push_back(std::move(m));
  }
  std::vector<MetricRecord> take() { return std::move(out_); }

 private:
  MetricRecord base(const std::string& name) const {
    MetricRecord m;
    m.repetition = repetition_;
    m.name = name;
    m.unit = metric(name).unit;
    m.clock = Clock::Model;
    return m;
  }
  int repetition_;
  std::vector<MetricRecord> out_;
};

}  // namespace

void StepCollector::on_step(const StepDone& done) {
  kv::soc::StepOps step = recorder_.close_step(done.phase, done.request, done.tokens);
  step.produced = done.produced;
  step.model_share = done.model_share;
  if (done.phase == kv::Phase::Prefill && done.attended > 0) {
    reference_ = Reference{step.attention, done.context, done.attended};
  }
  if (done.phase == kv::Phase::Prefill && done.attended < done.tokens && reference_) {
    OpCounts completed = complete(reference_->attention, reference_->queries, reference_->context, done.tokens, done.context);
    // The chunk's own L2 traffic stays as it happened.
    completed.demand_pages = step.attention.demand_pages;
    completed.demand_bytes = step.attention.demand_bytes;
    completed.prefetch_pages = step.attention.prefetch_pages;
    completed.prefetch_bytes = step.attention.prefetch_bytes;
    completed.demand_buffered = step.attention.demand_buffered;
    completed.demand_waits = step.attention.demand_waits;
    completed.prefetch_buffered = step.attention.prefetch_buffered;
    completed.demoted_pages = step.attention.demoted_pages;
    completed.bytes_read[2] = step.attention.bytes_read[2];
    completed.bytes_written[2] = step.attention.bytes_written[2];
    step.attention = completed;
    prefill_extrapolated_ = true;
  }
  steps_.push_back(std::move(step));
}

double bytes_per_weight(kv::soc::WeightFormat format) {
  switch (format) {
    case kv::soc::WeightFormat::F32: return 4.0;
    case kv::soc::WeightFormat::F16: return 2.0;
    case kv::soc::WeightFormat::Q8: return 1.0 + 2.0 / 32.0;
    case kv::soc::WeightFormat::Q4: return 0.5 + 2.0 / 32.0;
  }
  return 4.0;
}

kv::soc::ModelWork model_work(const kv::SyntheticPreset& preset) {
  kv::soc::ModelWork work;
  work.format = preset.weight_bits <= 4   ? kv::soc::WeightFormat::Q4
                : preset.weight_bits <= 8 ? kv::soc::WeightFormat::Q8
                : preset.weight_bits <= 16 ? kv::soc::WeightFormat::F16
                                           : kv::soc::WeightFormat::F32;
  work.macs_per_token = preset.non_attention_macs_per_token();
  const double per = preset.weight_bits / 8.0 + (preset.weight_group > 0 ? 2.0 / preset.weight_group : 0.0);
  work.weight_bytes = static_cast<std::uint64_t>(static_cast<double>(work.macs_per_token) * per);
  const std::uint64_t embeddings = preset.tied_embeddings ? 0 : static_cast<std::uint64_t>(preset.vocab_size) * preset.hidden_size;
  work.resident_bytes = static_cast<std::uint64_t>(static_cast<double>(work.macs_per_token + embeddings) * per);
  return work;
}

kv::soc::ModelWork model_work(const kv::LlamaWeights& w) {
  const kv::LlamaConfig& c = w.config;
  kv::soc::ModelWork work;
  // The matrices' own format (GGUF f16 or q8 weights stay so in memory; dense() dequantizes panels).
  work.format = w.wq.format() == kv::DenseFormat::F16  ? kv::soc::WeightFormat::F16
                : w.wq.format() == kv::DenseFormat::Q8 ? kv::soc::WeightFormat::Q8
                                                       : kv::soc::WeightFormat::F32;
  const auto dim = static_cast<std::uint64_t>(c.dim), kv_dim = static_cast<std::uint64_t>(c.kv_dim());
  const std::uint64_t per_layer = 2 * dim * dim + 2 * dim * kv_dim + 3 * dim * static_cast<std::uint64_t>(c.hidden_dim);
  work.macs_per_token = static_cast<std::uint64_t>(c.layers) * per_layer + static_cast<std::uint64_t>(c.vocab_size) * dim;
  std::uint64_t bytes = 0;
  for (const kv::DenseMatrix* m : {&w.wq, &w.wk, &w.wv, &w.wo, &w.w1, &w.w2, &w.w3, &w.wcls}) bytes += m->bytes().size();
  work.weight_bytes = bytes;
  work.resident_bytes = bytes + w.token_embedding.size() * sizeof(float);
  return work;
}

std::vector<MetricRecord> modelled_metrics(const PricedCase& priced, const kv::soc::SocProfile& profile, int repetition) {
  kv::soc::CostInput input;
  input.steps.reserve(priced.steps->size());
  for (const kv::soc::StepOps& step : *priced.steps) {
    kv::soc::StepOps whole = step;
    whole.append = scaled(step.append, priced.layer_scale);
    whole.attention = scaled(step.attention, priced.layer_scale);
    input.steps.push_back(std::move(whole));
  }
  input.model = priced.model;
  input.kv_resident_bytes = priced.kv_resident_bytes;
  input.ttft_target_ms = priced.ttft_target_ms;
  input.tpot_target_ms = priced.tpot_target_ms;
  const kv::soc::CostFigures f = kv::soc::price(input, profile);

  const bool scaled_layers = priced.layer_scale != 1.0;
  const bool prefill_x = scaled_layers || priced.prefill_extrapolated;
  Records r(repetition);
  const bool prompt = !f.ttft_ms.empty(), decode = !f.tpot_ms.empty();
  const TtftSplit split = split_ttft(f.ttft_ms);
  if (prompt) {
    r.value("ttft_ms", f.ttft_mean_ms, prefill_x);
    r.value("ttft_first_request_ms", *split.first, prefill_x);
    if (split.followup_p50) {
      r.value("ttft_followup_ms_p50", *split.followup_p50, prefill_x);
    } else {
      r.na("ttft_followup_ms_p50", "one request with a prompt: no follow-up");
    }
    r.value("prefill_tps", f.prefill_tps, prefill_x);
  } else {
    for (const char* name : {"ttft_ms", "ttft_first_request_ms", "ttft_followup_ms_p50"}) r.na(name, "no prompt");
    r.na("prefill_tps", "no prefill phase");
  }
  if (decode) {
    r.value("tpot_ms_p50", f.tpot_p50_ms, scaled_layers);
    r.value("tpot_ms_p90", f.tpot_p90_ms, scaled_layers);
    r.value("tpot_ms_p99", f.tpot_p99_ms, scaled_layers);
    r.value("decode_tps", f.decode_tps, scaled_layers);
  } else {
    for (const char* name : {"tpot_ms_p50", "tpot_ms_p90", "tpot_ms_p99", "decode_tps"}) r.na(name, "no decode steps");
  }
  if (priced.ttft_target_ms <= 0.0 && priced.tpot_target_ms <= 0.0) {
    r.na("goodput", "the workload sets no ttft/tpot targets");
  } else if (!prompt) {
    r.na("goodput", "no request with a prompt");
  } else {
    r.value("goodput", f.goodput, prefill_x);
  }
  r.value("dma_wait_ms", f.dma_wait_ms, prefill_x);
  for (kv::Phase phase : {kv::Phase::Prefill, kv::Phase::Decode}) {
    const kv::soc::PhaseCost& p = phase == kv::Phase::Prefill ? f.prefill : f.decode;
    const bool x = phase == kv::Phase::Prefill ? prefill_x : scaled_layers;
    const std::string_view name = kv::phase_name(phase);
    const auto span = [&](kv::Span s, double ms) { r.value(span_metric_name(name, kv::span_name(s)), ms, x); };
    span(kv::Span::Total, p.total_ms);
    span(kv::Span::AttnCompute, p.attn_compute_ms);
    span(kv::Span::KvQuant, p.kv_quant_ms);
    span(kv::Span::Select, p.select_ms);
    span(kv::Span::DmaWait, p.dma_wait_ms);
    span(kv::Span::ModelCompute, p.model_compute_ms);
  }
  if (decode) {
    r.value("energy_mj_per_token", f.energy_mj_per_token, scaled_layers);
  } else {
    r.na("energy_mj_per_token", "no decode steps");
  }
  if (prompt) {
    r.value("energy_mj_prefill", f.energy_mj_prefill, prefill_x);
  } else {
    r.na("energy_mj_prefill", "no prompt");
  }
  r.value("fits_in_memory", f.fits_in_memory ? 1.0 : 0.0, false);
  r.value("memory_headroom_bytes", f.memory_headroom_bytes, scaled_layers);
  return r.take();
}

}  // namespace kvbench
