// Speculative decoding on the llama backend against plain greedy decoding, the same positions
// from BOS (engine/model/llama_speculative.h), all engine threads, target KV in F16:
// BM_LlamaGreedy/<model>: plain greedy decoding (items_per_second: generated tokens per second).
// BM_LlamaSpeculative/<model>/<draft>/<k>: the same through draft-and-verify rounds; counters
// accept_rate (accepted / proposed draft tokens), tokens_per_verify (committed per verify step,
// the target's own token included) and draft_steps per generated token. Draft `kv` reads its
// own copy of the context in q2.
// Models: stories260K from the repository's models/, stories15M where models/fetch.sh left it
// (an error row naming the missing file otherwise).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "bench_options.h"
#include "model/llama_model.h"
#include "model/llama_speculative.h"
#include "model_loader.h"
#include "runner.h"

namespace {

struct BenchModel {
  std::string name;
  std::string missing;  // why it cannot run here ("" when loaded)
  std::shared_ptr<const kv::LlamaWeights> weights;
};

const BenchModel& bench_model(const std::string& name) {
  static std::map<std::string, BenchModel> loaded;
  auto it = loaded.find(name);
  if (it != loaded.end()) return it->second;
  BenchModel m{name, "", nullptr};
  const std::string path = name == "stories260K" ? kvbench::resolve_models_dir("") + "/stories260K.bin"
                                                 : kvbench::fetched_models_dir() + "/stories15M.bin";
  if (!std::ifstream(path)) {
    m.missing = path + " is missing" + (name == "stories260K" ? "" : ": models/fetch.sh fetches it");
  } else {
    m.weights = std::make_shared<const kv::LlamaWeights>(kv::load_llama2c(path));
  }
  return loaded.emplace(name, std::move(m)).first->second;
}

kv::CacheConfig cache_config(const kv::LlamaConfig& c, kv::Format format) {
  kv::CacheConfig config;
  config.geometry = {c.layers, c.heads, c.kv_heads, c.head_dim(), c.seq_len};
  config.k_format = format;
  config.v_format = format;
  config.v_group = c.head_dim() % 16 == 0 ? 16 : 8;
  config.page_tokens = 16;
  config.threads = kvbench::micro::options().threads;
  return config;
}

// The positions every run generates: the model's trained length, at most 256.
int positions(const kv::LlamaConfig& c) { return std::min(256, c.seq_len); }

// draft: "" plain, "kv", or "layers:N".
void llama_decode(benchmark::State& state, const std::string& model_name, const std::string& draft_name, int k) {
  const BenchModel& m = bench_model(model_name);
  if (m.weights == nullptr) {
    state.SkipWithError(m.missing.c_str());
    return;
  }
  const kv::LlamaConfig& c = m.weights->config;
  if (draft_name.rfind("layers:", 0) == 0 && std::stoi(draft_name.substr(7)) >= c.layers) {
    state.SkipWithError("the draft has as many layers as the model");
    return;
  }
  kv::ThreadPool pool(kvbench::micro::options().threads);
  kv::LlamaModel model(m.weights, c.seq_len, pool);
  kv::KVCache cache(cache_config(c, kv::Format::F16));
  kv::KVCache draft_cache(cache_config(c, kv::Format::Q2));
  kv::LlamaDraft draft;
  if (draft_name == "kv") {
    draft.kind = kv::LlamaDraft::Kind::Kv;
    draft.cache = &draft_cache;
  } else if (!draft_name.empty()) {
    draft.layers = std::stoi(draft_name.substr(7));
  }
  const int steps = positions(c);
  kv::SpeculativeDecodeStats stats;
  std::size_t generated = 0;
  for (auto _ : state) {
    const std::vector<int> out = draft_name.empty() ? kv::generate_greedy(model, cache, {1}, steps)
                                                    : kv::generate_speculative(model, cache, draft, {1}, steps, k, &stats);
    generated += out.size();
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(generated));
  if (!draft_name.empty()) {
    state.counters["accept_rate"] = stats.accept_rate();
    state.counters["tokens_per_verify"] = stats.tokens_per_verify();
    state.counters["draft_steps_per_token"] = generated > 0 ? static_cast<double>(stats.draft_steps) / static_cast<double>(generated) : 0.0;
  }
}

struct RegisterSpeculativeBenchmarks {
  RegisterSpeculativeBenchmarks() {
    for (const char* model : {"stories260K", "stories15M"}) {
      benchmark::RegisterBenchmark((std::string("BM_LlamaGreedy/") + model).c_str(), llama_decode, model, "", 0)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
      for (const char* draft : {"layers:2", "layers:3", "kv"}) {
        for (int k : {2, 4, 8}) {
          const std::string name = std::string("BM_LlamaSpeculative/") + model + "/" + draft + "/" + std::to_string(k);
          benchmark::RegisterBenchmark(name.c_str(), llama_decode, model, draft, k)->UseRealTime()->Unit(benchmark::kMillisecond);
        }
      }
    }
  }
} register_speculative_benchmarks;

}  // namespace
