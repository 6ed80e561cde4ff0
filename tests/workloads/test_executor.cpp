#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "accuracy.h"
#include "engine/model/speculative_check.h"
#include "executor.h"
#include "model/llama_model.h"
#include "model/llama_speculative.h"
#include "model/synthetic.h"
#include "model/tokenizer.h"
#include "recorder.h"
#include "test_support.h"
#include "workloads/synthetic_rig.h"

using namespace kvbench;

TEST_CASE("The perplexity workload reproduces kvbench score's protocol exactly", "[workloads][model]") {
  auto weights = std::make_shared<const kv::LlamaWeights>(kv::load_llama2c(kvtest::model_file("stories260K.bin")));
  const kv::Tokenizer tokenizer = kv::load_llama2c_tokenizer(kvtest::model_file("tok512.bin"), 512);
  std::ifstream in(kvtest::model_file("tinystories-sample.txt"), std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const std::vector<int> tokens = tokenizer.encode(text.str(), true, false);

  WorkloadConfig w;
  w.name = w.kind = "perplexity";
  w.context_tokens = 128;
  w.windows = 2;
  ScriptTarget target;
  target.synthetic = false;
  target.max_positions = 512;
  target.text_tokens = static_cast<int>(tokens.size());
  const Script script = build_script(w, target).script;

  kv::ThreadPool pool(2);
  kv::CacheConfig tested;
  tested.geometry = {weights->config.layers, weights->config.heads, weights->config.kv_heads, weights->config.head_dim(), 128};
  tested.k_format = kv::Format::Q4;
  tested.v_format = kv::Format::Q4;
  tested.page_tokens = 16;
  tested.threads = 2;
  kv::CacheConfig reference = tested;
  reference.k_format = reference.v_format = kv::Format::F32;

  kv::LlamaModel model(weights, 128, pool), ref_model(weights, 128, pool);
  kv::KVCache cache(tested), ref_cache(reference);
  kv::SparseDecoder decoder(cache, kv::SparsePolicy{});
  Executor executor(model, cache, decoder, 1.0, {}, LlamaRun{&model, &ref_model, &ref_cache, &tokens});
  const ExecutionResult result = executor.run(script);
  REQUIRE(result.accuracy);
  CHECK(result.ttft_ms.empty());
  CHECK(result.decode_tokens == 256);
  CHECK(result.tpot_ms.size() == 256);
  CHECK_FALSE(result.extrapolated);

  ScoringConfig scoring;
  scoring.window = 128;
  scoring.max_windows = 2;
  const AccuracyReport expected = score_tokens(weights, reference, tested, tokens, scoring, pool);
  CHECK(result.accuracy->predictions == expected.predictions);
  CHECK(result.accuracy->ppl == expected.ppl);
  CHECK(result.accuracy->kl_mean == expected.kl_mean);
  CHECK(result.accuracy->top1_agree == expected.top1_agree);
}

TEST_CASE("Synthetic prefill is probed and extrapolated, decode steps are timed and scaled", "[workloads]") {
  WorkloadConfig w;
  w.name = w.kind = "rag";
  w.context_tokens = 4096;
  w.gen_tokens = 8;
  ScriptTarget target;
  target.max_positions = 8192;
  const Script script = build_script(with_defaults(w, 8192), target).script;
  kv::SparsePolicy policy;
  policy.sample_every = 4;
  kvtest::SyntheticRig rig(script, 4096, policy, [](kv::CacheConfig& c) { c.k_format = c.v_format = kv::Format::Q8; });
  ExecutionOptions options = rig.options();
  options.full_prefill_positions = 0;  // a 4K prompt would run in full
  options.probe_chunks = 1;  // needs two: the first and the last chunk
  CHECK_THROWS_AS(Executor(rig.model, rig.cache, rig.decoder, 24.0, {}, std::nullopt, options), std::invalid_argument);
  options.probe_chunks = 3;
  Executor executor(rig.model, rig.cache, rig.decoder, 24.0, rig.ask_needle(), std::nullopt, options);
  const ExecutionResult result = executor.run(script);
  CHECK(result.prefill_probed);
  CHECK(result.extrapolated);
  CHECK(result.layer_scale == 24.0);
  CHECK(result.prefill_tokens == 4096);
  CHECK(result.decode_tokens == 8);
  REQUIRE(result.ttft_ms.size() == 1);
  CHECK(result.ttft_ms[0] > 0.0);
  CHECK(result.ttft_ms[0] == Approx(result.prefill.total_ms));
  CHECK(result.prefill.model_ms == 0.0);  // the generator is not timed
  REQUIRE(result.tpot_ms.size() == 8);
  for (double t : result.tpot_ms) CHECK(t > 0.0);
  CHECK(rig.figures.needle_recall() == 1.0);  // full attention keeps the needle
  CHECK(rig.cache.stats().sealed_pages == 0);  // the sequence was released at the end
}

TEST_CASE("A synthetic prompt that ends by full_prefill_positions attends every query, a longer one is probed",
          "[workloads]") {
  const kv::SyntheticPreset& preset = kv::find_synthetic_preset("qwen-0.5b-gqa", "test");
  kv::ThreadPool pool(2);
  struct Case {
    int prompt, full_positions, attended;  // attended: per layer, over the prompt
  };
  // A RAG prompt is its documents and a 32-token question (one chunk, probed with its 32
  // queries). 1536 tokens in full; the same probed (documents in chunks of 512, 512 and 480, each
  // probed with 64 queries); documents ending in a chunk of 10 tokens, which is never a probe (it
  // would time the multi-query decode).
  for (const Case c : {Case{1536, 4096, 1536}, Case{1536, 1024, 3 * 64 + 32}, Case{1066, 0, 2 * 64 + 32}}) {
    CAPTURE(c.prompt, c.full_positions);
    WorkloadConfig w;
    w.name = w.kind = "rag";
    w.context_tokens = c.prompt;
    w.gen_tokens = 2;
    ScriptTarget target;
    target.max_positions = 4096;
    const Script script = build_script(with_defaults(w, 4096), target).script;
    kv::SyntheticConfig config;
    config.calibration_ctx = c.prompt;
    config.needles = script.needles;
    kv::SyntheticModel model(preset, config, {12}, script.positions, pool);
    kv::CacheConfig cache_config;
    cache_config.geometry = model.geometry();
    kv::KVCache cache(cache_config);
    kv::SparseDecoder decoder(cache, kv::SparsePolicy{});
    ExecutionOptions options;
    options.full_prefill_positions = c.full_positions;
    int appended = 0, attended = 0;
    options.on_step = [&](const StepDone& done) {
      if (done.phase != kv::Phase::Prefill) return;
      appended += done.tokens;
      attended += done.attended;
    };
    Executor executor(model, cache, decoder, 1.0, [&](int i) { model.ask_needle(i); }, std::nullopt, options);
    const ExecutionResult result = executor.run(script);
    REQUIRE(appended == c.prompt);
    CHECK(attended == c.attended);
    CHECK(result.prefill_probed == (c.attended < c.prompt));
    CHECK(result.extrapolated == (c.attended < c.prompt));
  }
}

namespace {

// Pages sealed during prefill, head by head (Telemetry::on_page_sealed).
struct PrefillSeals final : kv::Telemetry {
  int pages = 0;
  void on_page_sealed(const kv::PageSealed& event) override { pages += event.phase == kv::Phase::Prefill ? 1 : 0; }
  void on_nan_inf(int, std::uint64_t) override {}
  void on_kernel(kv::KernelKind, kv::Isa) override {}
  void on_ops(kv::Phase, const kv::OpCounts&) override {}
};

}  // namespace

TEST_CASE("With a visual block an image's whole pages seal as they fill, whatever the residual keeps, and stay read-only",
          "[workloads]") {
  const kv::SyntheticPreset& preset = kv::find_synthetic_preset("qwen-0.5b-gqa", "test");
  kv::ThreadPool pool(2);
  WorkloadConfig w;
  w.name = w.kind = "multimodal";
  w.images = 2;
  w.visual_tokens = 160;  // two whole pages of 64 and a partial third, which stays a text page
  w.context_tokens = 512;
  w.gen_tokens = 2;
  struct Case {
    bool visual, prefix_cache;
  };
  for (const Case c : {Case{false, false}, Case{true, false}, Case{true, true}}) {
    CAPTURE(c.visual, c.prefix_cache);
    ScriptTarget target;
    target.max_positions = 2048;
    target.image_page_tokens = c.visual ? 64 : 0;
    const Script script = build_script(with_defaults(w, 2048), target).script;
    REQUIRE(script.images.size() == 2);
    kv::SyntheticConfig config;
    config.calibration_ctx = script.positions;
    config.needles = script.needles;
    for (const Script::TokenRange& image : script.images) config.images.push_back({image.begin, image.end});
    kv::SyntheticModel model(preset, config, {12}, script.positions, pool);
    kv::CacheConfig cache_config;
    cache_config.geometry = model.geometry();
    cache_config.page_tokens = 64;
    // Longer than the script: only an image seals a page. With the prefix cache, 0: the prompt's
    // pages are cached, and the measured run takes the images from the cache.
    cache_config.residual_tokens = c.prefix_cache ? 0 : 4096;
    cache_config.prefix_cache = c.prefix_cache;
    PrefillSeals seals;
    kv::KVCache cache(cache_config, &seals);
    kv::SparsePolicy policy;
    policy.selector = kv::Selector::Quest;
    policy.budget = 0.5f;
    policy.window = 64;
    if (c.visual) policy.visual.budget = 0.5f;
    kv::SparseDecoder decoder(cache, policy);
    const auto ask = [&](int i) { model.ask_needle(i); };
    const int kv_heads = model.geometry().kv_heads;
    if (c.prefix_cache) {
      // Warmed without the block: the cached pages are ordinary until the measured run adds its images.
      kv::SparsePolicy text_only = policy;
      text_only.visual = {};
      kv::SparseDecoder warm_decoder(cache, text_only);
      Executor(model, cache, warm_decoder, 1.0, ask, std::nullopt, ExecutionOptions{}).run(warm_script(script));
      REQUIRE(cache.stats().read_only_pages == 0);
      const ExecutionResult result = Executor(model, cache, decoder, 1.0, ask, std::nullopt, ExecutionOptions{}).run(script);
      REQUIRE(result.prefix_hit_tokens.size() == 2);  // a question an image, one sequence
      CHECK(result.prefix_hit_tokens[0] > script.images[1].end);  // both images came from the cache
      // The cached pages of both images, read-only: 2 whole pages each, every kv head.
      CHECK(cache.stats().read_only_pages == static_cast<std::size_t>(2 * 2 * kv_heads));
    } else {
      Executor(model, cache, decoder, 1.0, ask, std::nullopt, ExecutionOptions{}).run(script);
      // The second image's whole pages and every page before them, each kv head.
      CHECK(seals.pages == (c.visual ? (script.images[1].begin / 64 + 2) * kv_heads : 0));
      CHECK(cache.stats().read_only_pages == 0);  // the sequence was released at the end
    }
  }
}

namespace {

// The exact source of the sparse decoder's checks, slowed by a known time per check: what a
// costly measurement looks like to the executor.
class SleepingExact final : public kv::ExactKV {
 public:
  SleepingExact(const kv::ExactKV& inner, std::chrono::milliseconds sleep) : inner_(inner), sleep_(sleep) {}
  void exact_key(int layer, int kv_head, int pos, float* out) const override { inner_.exact_key(layer, kv_head, pos, out); }
  void exact_value(int layer, int kv_head, int pos, float* out) const override { inner_.exact_value(layer, kv_head, pos, out); }
  std::vector<std::vector<int>> asked_needles() const override {  // called once per check
    ++checks;
    std::this_thread::sleep_for(sleep_);
    return inner_.asked_needles();
  }
  mutable int checks = 0;

 private:
  const kv::ExactKV& inner_;
  std::chrono::milliseconds sleep_;
};

}  // namespace

TEST_CASE("Quality checks run outside every timed figure: a sleeping checker is not in tpot, decode or ttft", "[workloads]") {
  const kv::SyntheticPreset& preset = kv::find_synthetic_preset("qwen-0.5b-gqa", "test");
  WorkloadConfig w;
  w.name = w.kind = "rag";
  w.context_tokens = 1024;
  w.gen_tokens = 6;
  ScriptTarget target;
  target.max_positions = 8192;
  const Script script = build_script(with_defaults(w, 8192), target).script;
  kv::SyntheticConfig config;
  config.calibration_ctx = 1024;
  config.needles = script.needles;
  kv::ThreadPool pool(2);
  kv::SyntheticModel model(preset, config, {12}, script.positions, pool);
  kv::CacheConfig cache_config;
  cache_config.geometry = model.geometry();
  cache_config.k_format = cache_config.v_format = kv::Format::Q4;
  kv::KVCache cache(cache_config);
  kv::SparsePolicy policy;
  policy.sample_every = 1;  // every decode step is checked
  const auto sleep = std::chrono::milliseconds(400);
  SleepingExact exact(model, sleep);
  kvbench::Recorder figures;
  kv::SparseDecoder decoder(cache, policy, &figures);
  kvbench::QualityMonitor quality(exact, policy, &figures);
  ExecutionOptions checked;
  checked.quality = &quality;
  Executor executor(model, cache, decoder, 1.0, [&](int i) { model.ask_needle(i); }, std::nullopt, checked);
  const ExecutionResult result = executor.run(script);
  REQUIRE(exact.checks == 6);  // one per decode step (one executed layer)
  REQUIRE(result.tpot_ms.size() == 6);
  const double slept_ms = static_cast<double>(sleep.count());
  // The engine's own work for one q4 step of one layer at 1K tokens is far below the sleep,
  // even under a sanitizer; a step that held a check would take at least the sleep.
  for (double t : result.tpot_ms) CHECK(t < slept_ms);
  CHECK(result.decode.total_ms < 6 * slept_ms);  // with the checks inside it would be at least that
  CHECK(result.decode.quality_ms >= 6 * slept_ms);
  CHECK(result.decode_tokens / (result.decode.total_ms * 1e-3) > 1000.0 / slept_ms);  // with the checks: <= 2.5 tok/s
  // TTFT is the prefill's timed work alone; the synthetic prefill runs no checks at all.
  REQUIRE(result.ttft_ms.size() == 1);
  CHECK(result.ttft_ms[0] == Approx(result.prefill.total_ms));
  CHECK(result.prefill.quality_ms == 0.0);
  CHECK(figures.attn_mass_recall() > 0.99);  // the checks did run, on the full policy
}

TEST_CASE("Rag requests share the documents' pages through the prefix cache: the same attention, only the suffix prefilled",
          "[workloads][prefix]") {
  WorkloadConfig w;
  w.name = w.kind = "rag";
  w.context_tokens = 1024;
  w.gen_tokens = 4;
  w.requests = 3;
  ScriptTarget target;
  target.max_positions = 4096;
  const Script script = build_script(with_defaults(w, 4096), target).script;
  struct Run {
    ExecutionResult result;
    std::map<std::string, double> figures;
    kv::PrefixStats prefix;
  };
  const auto run = [&](bool prefix_cache) {
    kv::SparsePolicy policy;
    policy.sample_every = 1;
    kvtest::SyntheticRig rig(script, 1024, policy, [&](kv::CacheConfig& c) {
      c.k_format = c.v_format = kv::Format::Q4;
      c.page_tokens = 16;
      c.residual_tokens = 16;
      c.prefix_cache = prefix_cache;
    });
    Executor executor(rig.model, rig.cache, rig.decoder, 1.0, rig.ask_needle(), std::nullopt, rig.options());
    Run r{executor.run(script), rig.figures.scalars(), rig.cache.prefix_stats()};
    CHECK(rig.cache.stats().sealed_pages == r.prefix.entries * static_cast<std::size_t>(rig.config.geometry.kv_heads));
    return r;
  };
  const Run cold = run(false), cached = run(true);
  CHECK(cold.result.prefill_tokens == 3 * 1024);
  CHECK(cold.result.prefix_hit_tokens == std::vector<int>{0, 0, 0});
  CHECK(cold.prefix.entries == 0);
  // The documents are 992 tokens, 62 whole pages of 16: requests 2 and 3 prefill their question.
  CHECK(cached.result.prefix_hit_tokens == std::vector<int>{0, 992, 992});
  CHECK(cached.result.prompt_tokens == std::vector<int>{1024, 1024, 1024});
  CHECK(cached.result.prefill_tokens == 1024 + 2 * 32);
  CHECK(cached.prefix.lookups == 3);
  CHECK(cached.result.repeat_requests == std::vector<int>{1, 2});
  // Every quality figure of the decode steps is the same to the bit: the shared pages are the
  // pages the documents would have sealed to.
  for (const auto& [name, value] : cold.figures) {
    if (name.find("recall") == std::string::npos && name.find("error") == std::string::npos &&
        name.find("cosine") == std::string::npos) {
      continue;
    }
    CAPTURE(name);
    REQUIRE(cached.figures.count(name) == 1);
    CHECK(cached.figures.at(name) == value);
  }
  CHECK(cached.figures.at("needle_recall") == 1.0);
}

TEST_CASE("Speculative decoding: rounds of draft steps and one verify step commit every decode token once", "[workloads][speculative]") {
  WorkloadConfig w;
  w.name = w.kind = "rag";
  w.context_tokens = 512;
  w.gen_tokens = 40;
  ScriptTarget target;
  target.max_positions = 4096;
  const Script script = build_script(with_defaults(w, 4096), target).script;
  const double rate = GENERATE(0.0, 0.6, 1.0);
  CAPTURE(rate);
  SpeculativeConfig spec;
  spec.enabled = true;
  spec.k = 4;
  spec.accept_rate = rate;
  kvtest::SyntheticRig rig(script, 1024, kv::SparsePolicy{}, [](kv::CacheConfig& c) { c.k_format = c.v_format = kv::Format::Q4; });
  kv::CacheConfig draft_config = rig.config;
  draft_config.k_format = draft_config.v_format = kv::Format::Q2;
  kv::KVCache draft(draft_config);
  ExecutionOptions options = rig.options();
  options.speculative = &spec;
  options.draft = &draft;
  int produced = 0, draft_steps = 0, verify_steps = 0;
  options.on_step = [&](const StepDone& done) {
    if (done.phase != kv::Phase::Decode) return;
    const int added = done.produced < 0 ? done.tokens : done.produced;
    produced += added;
    draft_steps += added == 0 ? 1 : 0;
    verify_steps += done.tokens > 1 ? 1 : 0;
    CHECK(added <= done.tokens);
  };
  Executor executor(rig.model, rig.cache, rig.decoder, 1.0, rig.ask_needle(), std::nullopt, options);
  const ExecutionResult result = executor.run(script);
  REQUIRE(result.speculation);
  const SpeculationTotals& s = *result.speculation;
  CHECK(result.decode_tokens == 40);
  CHECK(produced == 40);
  CHECK(result.tpot_ms.size() == 40);
  CHECK(static_cast<int>(s.verify_steps) == verify_steps);
  CHECK(s.accepted <= s.proposed);
  // Every verify step commits its accepted proposals and the target's own token; a last
  // single token runs as a plain step.
  CHECK(s.committed == s.accepted + s.verify_steps);
  CHECK(s.committed <= 40);
  if (rate == 1.0) {
    CHECK(s.accepted == s.proposed);
    CHECK(s.verify_steps == 8);  // 40 tokens in rounds of k + 1 = 5
  }
  if (rate == 0.0) {
    CHECK(s.accepted == 0);
    CHECK(s.committed == s.verify_steps);
  }
  // The draft proposes k per round (fewer near the end) and catches up after full acceptance.
  CHECK(draft_steps >= static_cast<int>(s.proposed));
  CHECK(s.draft_ms > 0.0);
  CHECK(s.verify_ms > 0.0);
  CHECK(s.draft_peak_bytes > 0);
  CHECK(rig.cache.stats().sealed_pages == 0);  // both sequences were released
  CHECK(draft.stats().sealed_pages == 0);
  CHECK(draft.stats().residual_pages == 0);
}

TEST_CASE("Speculative decoding on the llama backend: decode runs free and generates plain greedy decoding's tokens, both drafts",
          "[workloads][speculative][model]") {
  auto weights = std::make_shared<const kv::LlamaWeights>(kv::load_llama2c(kvtest::model_file("stories260K.bin")));
  const kv::Tokenizer tokenizer = kv::load_llama2c_tokenizer(kvtest::model_file("tok512.bin"), 512);
  std::ifstream in(kvtest::model_file("tinystories-sample.txt"), std::ios::binary);
  std::stringstream sample;
  sample << in.rdbuf();
  const std::vector<int> text = tokenizer.encode(sample.str(), true, false);
  WorkloadConfig w;
  w.name = w.kind = "speculative";
  w.context_tokens = 96;
  w.gen_tokens = 120;
  ScriptTarget target;
  target.synthetic = false;
  target.max_positions = 512;
  target.text_tokens = static_cast<int>(text.size());
  const Script script = build_script(with_defaults(w, 512), target).script;

  kv::ThreadPool pool(2);
  kv::CacheConfig config;
  config.geometry = {weights->config.layers, weights->config.heads, weights->config.kv_heads, weights->config.head_dim(), 512};
  config.k_format = config.v_format = kv::Format::F32;
  config.v_group = 8;
  config.page_tokens = 16;
  config.threads = 2;
  kv::LlamaModel model(weights, 512, pool), ref_model(weights, 512, pool);
  // Plain greedy decoding after the same prompt, one token a step.
  kv::KVCache plain_cache(config);
  const std::vector<int> prompt(text.begin(), text.begin() + 96);
  const kvtest::Greedy all = kvtest::plain_greedy(model, plain_cache, prompt, 96 + 120);
  kvtest::Greedy plain;  // the tokens after the prompt
  plain.tokens.assign(all.tokens.begin() + 95, all.tokens.end());
  plain.gap.assign(all.gap.begin() + 95, all.gap.end());

  const int draft_layers = GENERATE(2, 0);
  CAPTURE(draft_layers);
  SpeculativeConfig spec;
  spec.enabled = true;
  spec.k = 4;
  spec.draft_layers = draft_layers;
  kv::CacheConfig draft_config = config;
  draft_config.k_format = draft_config.v_format = kv::Format::Q2;
  kv::KVCache cache(config), ref_cache(config), draft(draft_config);
  kv::SparseDecoder decoder(cache, kv::SparsePolicy{});
  ExecutionOptions options;
  options.speculative = &spec;
  options.draft = draft_layers == 0 ? &draft : nullptr;
  std::vector<double> shares;
  options.on_step = [&](const StepDone& done) {
    if (done.produced == 0) shares.push_back(done.model_share);
  };
  Executor executor(model, cache, decoder, 1.0, {}, LlamaRun{&model, &ref_model, &ref_cache, &text}, options);
  const ExecutionResult result = executor.run(script);
  REQUIRE(result.speculation);
  const SpeculationTotals& s = *result.speculation;
  CHECK(result.decode_tokens == 120);
  REQUIRE(result.generated.size() == 120);
  std::vector<int> generated = result.generated;
  generated.resize(std::min(generated.size(), plain.tokens.size()));
  kvtest::first_divergence(plain, generated);
  // Real acceptance: some proposals agree with the target, not all.
  CHECK(s.accepted > 0);
  CHECK(s.accepted <= s.proposed);
  CHECK(s.committed == s.accepted + s.verify_steps);
  CHECK(s.draft_ms > 0.0);
  // The prompt's positions are scored; the generated ones are followed, not scored.
  REQUIRE(result.accuracy);
  CHECK(result.accuracy->predictions == 96);
  // A layers:2 draft step runs 2 of 5 layers and the output head; a kv draft step the whole model.
  REQUIRE_FALSE(shares.empty());
  CHECK(shares.front() == Approx(draft_layers == 0 ? 1.0 : kv::layers_draft_dense_share(weights->config, 2)));
  CHECK((draft_layers == 0 ? s.draft_peak_bytes > 0 : s.draft_peak_bytes == 0));
  CHECK(cache.stats().sealed_pages == 0);
  CHECK(draft.stats().sealed_pages == 0);
}
