// Pricing a repetition: per-step counts sum to the recorder's per-phase counts, probed prefill
// chunks are completed by their causal work, and the modelled metrics are all on the model clock.
#include <catch2/catch.hpp>

#include <set>

#include "case_pricing.h"
#include "executor.h"
#include "metric_table.h"
#include "model/synthetic.h"
#include "soc_profiles.h"
#include "test_support.h"
#include "workloads/synthetic_rig.h"
#include "workload.h"

namespace {

using namespace kvbench;

struct SyntheticRun {
  Recorder recorder;
  StepCollector steps{recorder};
  ExecutionResult result;
};

// A rag script on one layer of a small preset, with page sealing and selection; `l2_dir`
// non-empty: L1 capped just above its minimum, so pages swap.
void run(SyntheticRun& r, int probe_queries, const std::string& l2_dir = "") {
  WorkloadConfig w;
  w.name = w.kind = "rag";
  w.context_tokens = 2048;
  w.gen_tokens = 16;
  ScriptTarget target;
  target.max_positions = 8192;
  const Script script = build_script(with_defaults(w, 8192), target).script;
  kv::SparsePolicy policy;
  policy.selector = kv::Selector::Hybrid;
  policy.budget = 0.25f;
  kvtest::SyntheticRig rig(script, 2048, policy, [&](kv::CacheConfig& c) {
    c.k_format = c.v_format = kv::Format::Q4;
    c.residual_tokens = 64;
    if (!l2_dir.empty()) {
      c.memory.l1_bytes = kv::minimum_l1_bytes(c, script.positions).bytes + (64u << 10);
      c.memory.l2.dir = l2_dir;
    }
  }, &r.recorder);
  ExecutionOptions options = rig.options();
  options.probe_queries = probe_queries;
  options.full_prefill_positions = 0;  // the probes, whatever the prompt's size
  options.on_step = [&](const StepDone& done) { r.steps.on_step(done); };
  Executor executor(rig.model, rig.cache, rig.decoder, 1.0, rig.ask_needle(), std::nullopt, options);
  r.result = executor.run(script);
}

void check_equal(const kv::OpCounts& a, const kv::OpCounts& b) {
  for (int t = 0; t < kv::kTierCount; ++t) {
    for (int f = 0; f < kv::kFormatCount; ++f) {
      CHECK(a.bytes_read[t][f] == b.bytes_read[t][f]);
      CHECK(a.bytes_written[t][f] == b.bytes_written[t][f]);
    }
  }
  for (int f = 0; f < kv::kFormatCount; ++f) {
    CHECK(a.macs[f] == b.macs[f]);
    CHECK(a.quantized_values[f] == b.quantized_values[f]);
  }
  CHECK(a.softmax_exps == b.softmax_exps);
  CHECK(a.bound_products == b.bound_products);
  CHECK(a.attention_calls == b.attention_calls);
  CHECK(a.context_pages == b.context_pages);
  CHECK(a.managed_pages == b.managed_pages);
  CHECK(a.selections == b.selections);
  CHECK(a.demand_pages == b.demand_pages);
  CHECK(a.demand_bytes == b.demand_bytes);
  CHECK(a.prefetch_pages == b.prefetch_pages);
  CHECK(a.prefetch_bytes == b.prefetch_bytes);
  CHECK(a.demand_buffered == b.demand_buffered);
  CHECK(a.demand_waits == b.demand_waits);
  CHECK(a.prefetch_buffered == b.prefetch_buffered);
  CHECK(a.demoted_pages == b.demoted_pages);
}

}  // namespace

TEST_CASE("case pricing: per-step counts sum to the per-phase counts", "[case_pricing]") {
  kvtest::TempDir dir("case-pricing");
  const bool capped = GENERATE(false, true);
  INFO((capped ? "L1 capped, swapping to L2" : "no cap"));
  SyntheticRun r;
  run(r, 512, capped ? dir.path : "");  // every prefill query attended: nothing to complete
  CHECK_FALSE(r.steps.prefill_extrapolated());
  kv::OpCounts sum[2];
  int prefill = 0, decode = 0;
  for (const kv::soc::StepOps& s : r.steps.steps()) {
    sum[static_cast<int>(s.phase)] += s.append;
    sum[static_cast<int>(s.phase)] += s.attention;
    (s.phase == kv::Phase::Prefill ? prefill : decode) += s.tokens;
  }
  CHECK(prefill == r.result.prefill_tokens);
  CHECK(decode == r.result.decode_tokens);
  check_equal(sum[0], r.recorder.ops(kv::Phase::Prefill));
  check_equal(sum[1], r.recorder.ops(kv::Phase::Decode));
  CHECK(sum[1].bound_products > 0);  // selection is counted in decode
  CHECK(sum[0].quantized_values[static_cast<int>(kv::Format::Q4)] > 0);
  if (capped) {
    // Demotions while sealing (prefill) and loads back (decode) are in the steps too.
    const kv::OpCounts& prefill_ops = r.recorder.ops(kv::Phase::Prefill);
    CHECK(prefill_ops.demoted_pages > 0);
    CHECK(sum[0].bytes_written[2][static_cast<int>(kv::Format::Q4)] > 0);
    CHECK(sum[1].demand_pages + sum[1].prefetch_pages > 0);
    std::uint64_t appended_l2 = 0;
    for (const kv::soc::StepOps& s : r.steps.steps()) appended_l2 += s.append.demoted_pages;
    CHECK(appended_l2 > 0);
  }
}

TEST_CASE("case pricing: probed prefill chunks are completed by their causal work", "[case_pricing]") {
  SyntheticRun full, probed;
  run(full, 512);
  run(probed, 16);
  CHECK(probed.steps.prefill_extrapolated());
  std::uint64_t full_macs = 0, probed_macs = 0, probed_recorded = 0;
  for (const auto& s : full.steps.steps()) {
    if (s.phase == kv::Phase::Prefill) full_macs += s.attention.macs[static_cast<int>(kv::Format::Q4)];
  }
  for (const auto& s : probed.steps.steps()) {
    if (s.phase == kv::Phase::Prefill) probed_macs += s.attention.macs[static_cast<int>(kv::Format::Q4)];
  }
  probed_recorded = probed.recorder.ops(kv::Phase::Prefill).macs[static_cast<int>(kv::Format::Q4)];
  CHECK(probed_recorded < full_macs / 10);  // the probes did a small part of the work
  CHECK(static_cast<double>(probed_macs) == Approx(static_cast<double>(full_macs)).epsilon(0.01));
}

TEST_CASE("case pricing: scaled counts and the dense layers of the backends", "[case_pricing]") {
  kv::OpCounts c;
  c.mac(kv::Format::F16, 10);
  c.read(kv::Tier::L1, kv::Format::F16, 7);
  c.demand_pages = 3;
  const kv::OpCounts x = scaled(c, 2.5);
  CHECK(x.macs[static_cast<int>(kv::Format::F16)] == 25);
  CHECK(x.bytes_read[1][static_cast<int>(kv::Format::F16)] == 18);  // 17.5 rounded
  CHECK(x.demand_pages == 8);

  const kv::SyntheticPreset& preset = kv::find_synthetic_preset("llama-7b-gqa", "test");
  const kv::soc::ModelWork w = model_work(preset);
  CHECK(w.macs_per_token == preset.non_attention_macs_per_token());
  CHECK(w.weight_bytes == 2 * w.macs_per_token);                      // f16
  CHECK(w.resident_bytes == 2 * (w.macs_per_token + 32000ull * 4096));  // and the embedding table
  CHECK(static_cast<double>(w.resident_bytes) == Approx(14.5e9).epsilon(0.02));
}

TEST_CASE("case pricing: every modelled figure is recorded on the model clock", "[case_pricing]") {
  SyntheticRun r;
  run(r, 16);
  PricedCase priced;
  priced.steps = &r.steps.steps();
  priced.layer_scale = 24.0;
  priced.prefill_extrapolated = r.steps.prefill_extrapolated();
  priced.model = model_work(kv::find_synthetic_preset("qwen-0.5b-gqa", "test"));
  priced.kv_resident_bytes = 1 << 20;
  const kv::soc::SocProfile profile = load_soc_profile("host", "");
  const std::vector<MetricRecord> metrics = modelled_metrics(priced, profile, 1);
  std::set<std::string> names;
  for (const MetricRecord& m : metrics) {
    INFO(m.name);
    CHECK(m.clock == Clock::Model);
    CHECK(names.insert(m.name).second);
    CHECK((m.value.has_value() || !m.na_reason.empty()));
  }
  for (const MetricDef& d : metric_table()) {
    INFO(d.name);
    if (d.modelled || d.clock == Clock::Model) CHECK(names.count(d.name) == 1);
  }
  for (const MetricRecord& m : metrics) {
    if (m.name == "tpot_ms_p50") CHECK(m.extrapolated);
    if (m.name == "fits_in_memory") CHECK(*m.value == 1.0);
  }
}

TEST_CASE("The llama backend's dense work is priced in the format its weights are held in", "[case_pricing]") {
  const kv::LlamaWeights f32 = kv::load_llama2c(kvtest::model_file("stories260K.bin"));
  const kv::LlamaConfig& c = f32.config;
  const kv::soc::ModelWork work = model_work(f32);
  CHECK(work.format == kv::soc::WeightFormat::F32);
  const std::uint64_t per_layer = 2ull * c.dim * c.dim + 2ull * c.dim * c.kv_dim() + 3ull * c.dim * c.hidden_dim;
  CHECK(work.macs_per_token == c.layers * per_layer + static_cast<std::uint64_t>(c.vocab_size) * c.dim);
  CHECK(work.weight_bytes == work.macs_per_token * 4);
  CHECK(work.resident_bytes == work.weight_bytes + static_cast<std::uint64_t>(c.vocab_size) * c.dim * 4);
  // The same model with f16 matrices (as a GGUF F16 file loads): half the bytes streamed.
  kv::LlamaWeights f16 = f32;
  for (kv::DenseMatrix* m : {&f16.wq, &f16.wk, &f16.wv, &f16.wo, &f16.w1, &f16.w2, &f16.w3, &f16.wcls}) {
    const std::vector<float> values = m->to_f32();
    *m = kv::DenseMatrix(kv::DenseFormat::F16, m->rows(), m->cols(), kv::dense_encode(kv::DenseFormat::F16, values.data(), m->rows(), m->cols()));
  }
  const kv::soc::ModelWork half = model_work(f16);
  CHECK(half.format == kv::soc::WeightFormat::F16);
  CHECK(half.macs_per_token == work.macs_per_token);
  CHECK(half.weight_bytes == work.macs_per_token * 2);
}
