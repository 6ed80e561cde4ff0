// Pricing one case repetition with a SoC profile: collecting the engine's per-step operation
// counts while it runs, completing the prefill chunks a synthetic run only probed, scaling
// sampled layers to the whole model, describing the dense layers, and turning the cost model's
// figures into metrics on the model clock.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "executor.h"
#include "model/llama_weights.h"
#include "model/synthetic_presets.h"
#include "recorder.h"
#include "results_store.h"
#include "soc/cost_model.h"

namespace kvbench {

// Gathers StepOps from the recorder after every step (the executor's on_step). A prefill chunk
// that attended fewer queries than it appended (a probed synthetic chunk, or one not probed at
// all) gets its attention counts completed from the latest attended chunk: multiply-adds and
// exponentials by the causal query-key pairs, page reads and calls by the query blocks and the
// context; such steps are extrapolated.
class StepCollector {
 public:
  explicit StepCollector(Recorder& recorder) : recorder_(recorder) {}
  void on_step(const StepDone& done);
  const std::vector<kv::soc::StepOps>& steps() const { return steps_; }
  std::vector<kv::soc::StepOps> take_steps() { return std::move(steps_); }
  bool prefill_extrapolated() const { return prefill_extrapolated_; }

 private:
  struct Reference {
    kv::OpCounts attention;
    int context = 0, queries = 0;
  };
  Recorder& recorder_;
  std::vector<kv::soc::StepOps> steps_;
  std::optional<Reference> reference_;
  bool prefill_extrapolated_ = false;
};

// Bytes per weight of a dense format, scales included (group 32, one f16 scale per group).
double bytes_per_weight(kv::soc::WeightFormat format);
// Synthetic presets describe their dense layers and how their weights are stored.
kv::soc::ModelWork model_work(const kv::SyntheticPreset& preset);
// The llama backend: the bytes and format its weight matrices are held in.
kv::soc::ModelWork model_work(const kv::LlamaWeights& weights);

struct PricedCase {
  const std::vector<kv::soc::StepOps>* steps = nullptr;  // as executed (sampled layers)
  double layer_scale = 1.0;
  bool prefill_extrapolated = false;
  kv::soc::ModelWork model;
  std::uint64_t kv_resident_bytes = 0;
  double ttft_target_ms = 0.0, tpot_target_ms = 0.0;
};

// The model-clock metrics of one repetition priced with `profile`.
std::vector<MetricRecord> modelled_metrics(const PricedCase& priced, const kv::soc::SocProfile& profile, int repetition);

}  // namespace kvbench
