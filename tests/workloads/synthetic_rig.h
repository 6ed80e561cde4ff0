// One sampled layer (12) of a small synthetic preset with its KV cache, sparse decoder and
// quality checks: what the executor's and the pricing's tests run scripts through.
#pragma once

#include <functional>

#include "executor.h"
#include "model/synthetic.h"
#include "recorder.h"

namespace kvtest {

struct SyntheticRig {
  // tweak: the cache's configuration, once its geometry is the model's (formats, pages, tiers).
  // recorder: where the cache, the decoder and the checks report (null: the rig's own).
  SyntheticRig(const kvbench::Script& script, int calibration_ctx, const kv::SparsePolicy& policy,
               const std::function<void(kv::CacheConfig&)>& tweak, kvbench::Recorder* recorder = nullptr)
      : model(kv::find_synthetic_preset("qwen-0.5b-gqa", "test"), synthetic_config(script, calibration_ctx), {12}, script.positions, pool),
        config(cache_config(model, tweak)),
        figures(recorder != nullptr ? *recorder : own_figures),
        cache(config, &figures),
        decoder(cache, policy, &figures),
        quality(model, policy, &figures) {}

  // Quality checks on; the rest as the caller sets it.
  kvbench::ExecutionOptions options() {
    kvbench::ExecutionOptions o;
    o.quality = &quality;
    return o;
  }
  std::function<void(int)> ask_needle() {
    return [this](int needle) { model.ask_needle(needle); };
  }

  kv::ThreadPool pool{2};
  kv::SyntheticModel model;
  kv::CacheConfig config;
  kvbench::Recorder own_figures;
  kvbench::Recorder& figures;
  kv::KVCache cache;
  kv::SparseDecoder decoder;
  kvbench::QualityMonitor quality;

 private:
  static kv::SyntheticConfig synthetic_config(const kvbench::Script& script, int calibration_ctx) {
    kv::SyntheticConfig c;
    c.calibration_ctx = calibration_ctx;
    c.needles = script.needles;
    return c;
  }
  static kv::CacheConfig cache_config(const kv::SyntheticModel& model, const std::function<void(kv::CacheConfig&)>& tweak) {
    kv::CacheConfig c;
    c.geometry = model.geometry();
    if (tweak) tweak(c);
    return c;
  }
};

}  // namespace kvtest
