#include <catch2/catch.hpp>

#include <thread>

#include "kv_cache.h"
#include "recorder.h"
#include "sparse/sparse_decoder.h"
#include "test_support.h"

using namespace kvbench;

TEST_CASE("the recorder aggregates what the engine reports", "[recorder]") {
  Recorder recorder;
  kv::PageSealed first;  // no reference yet: not in the health figures
  recorder.on_page_sealed(first);
  kv::PageSealed sealed;
  sealed.health = {0.1f, 0.4f, 0.05f, 0.01f, true};
  recorder.on_page_sealed(sealed);
  sealed.health = {0.3f, 0.2f, 0.15f, 0.03f, true};
  recorder.on_page_sealed(sealed);
  recorder.on_nan_inf(0, 3);
  recorder.on_kernel(kv::KernelKind::Decode, kv::Isa::Scalar);
  recorder.on_kernel(kv::KernelKind::Decode, kv::Isa::Scalar);
  kv::SelectionEvent selection;
  selection.context_tokens = 1000;
  selection.kept_tokens = {100, 300};  // keep ratio 0.2
  selection.score_histogram = {1, 2, 3};
  recorder.on_selection(selection);
  recorder.on_selection_quality({0, 0, 0.8, 0.1, 2, 1, 0.0, 1.0, 0.9, 0.05});
  recorder.on_selection_quality({1, 0, 0.6, 0.3, 2, 2, 0.0, 1.0, 0.7, 0.15});
  recorder.on_token_dropped({5, 1, 3, 1234, 0.25f});
  kv::MemoryEvent pressure;
  pressure.step = 9;
  pressure.to = kv::PressureLevel::Warning;
  recorder.on_memory_event(pressure);
  recorder.on_memory_sample({1, 0, 100, 0, 2'000'000, 0, 0, 1'000'000, kv::PressureLevel::Safe});
  recorder.on_memory_sample({2, 0, 300, 0, 0, 0, 0, 1'000'000, kv::PressureLevel::Safe});
  { Recorder::ScopedSpan span(recorder, kv::Phase::Decode, kv::Span::Select); }

  const auto s = recorder.scalars();
  CHECK(recorder.counter("pages_sealed") == 3);
  CHECK(s.at("scale_drift_mean") == Approx(0.2));
  CHECK(s.at("scale_drift_max") == Approx(0.4));
  CHECK(s.at("outlier_channel_ratio") == Approx(0.1));
  CHECK(s.at("clip_ratio") == Approx(0.02));
  CHECK(s.at("nan_inf_count") == 3);
  CHECK(s.at("token_drop_ratio") == Approx(0.8));
  CHECK(s.at("attn_mass_recall") == Approx(0.7));
  CHECK(s.at("oracle_mass_recall") == Approx(0.8));
  CHECK(s.at("critical_miss_rate") == Approx(0.2));
  CHECK(s.at("oracle_critical_miss_rate") == Approx(0.1));
  CHECK(s.at("needle_recall") == Approx(0.75));
  CHECK(s.count("span_decode_select_ms") == 1);
  CHECK(recorder.histograms().at("importance_score") == std::vector<std::int64_t>{1, 2, 3});
  CHECK(recorder.find_gauge("l1_used_bytes")->peak == 300);
  CHECK(recorder.find_gauge("l1_used_bytes")->value == 300);
  CHECK((*recorder.find_series("swap_in_gb_per_s"))[0] == Approx(2.0));  // 2 MB in 1 ms
  int kernels = 0, drops = 0, pressures = 0;
  for (const RunEvent& e : recorder.events()) {
    kernels += e.kind == EventKind::Kernel ? 1 : 0;
    drops += e.kind == EventKind::TokenDropped && e.step == 5 && e.position == 1234 && e.q_head == 3 ? 1 : 0;
    pressures += e.kind == EventKind::Pressure && e.step == 9 && e.to == kv::PressureLevel::Warning ? 1 : 0;
  }
  CHECK(kernels == 1);  // each kernel path once
  CHECK(drops == 1);
  CHECK(pressures == 1);
}

TEST_CASE("the recorder as the cache's sink sees pages, kernels, operations and memory", "[recorder]") {
  Recorder recorder;
  kv::CacheConfig config;
  config.geometry = {1, 4, 2, 32, 2048};
  config.k_format = kv::Format::Q4;
  config.v_format = kv::Format::Q4;
  config.page_tokens = 16;
  config.threads = 1;
  config.memory.l1_bytes = 1u << 20;
  kv::KVCache cache(config, &recorder);
  const kv::SeqId seq = cache.create_sequence();
  const auto k = kvtest::random_keys(600, 2, 32, 3);
  const auto v = kvtest::random_values(600 * 2 * 32, 4);
  cache.append(seq, 0, k.data(), v.data(), 600);
  cache.set_phase(kv::Phase::Decode);
  kv::SparsePolicy policy;
  policy.selector = kv::Selector::Hybrid;
  policy.budget = 0.25f;
  policy.window = 32;
  kv::SparseDecoder decoder(cache, policy, &recorder);
  const auto q = kvtest::random_values(4 * 32, 5);
  std::vector<float> out(q.size());
  for (int step = 0; step < 4; ++step) {
    decoder.attend(seq, 0, q.data(), out.data());
    decoder.end_step();
  }
  CHECK(recorder.counter("pages_sealed") == 2 * (600 / 16));
  CHECK(recorder.ops(kv::Phase::Decode).macs[static_cast<int>(kv::Format::Q4)] > 0);
  CHECK(recorder.find_series("keep_ratio")->size() == 4);
  CHECK(recorder.find_series("l1_used_bytes")->size() == 4);
  const auto s = recorder.scalars();
  CHECK(s.at("token_drop_ratio") > 0.5);
  CHECK(s.at("token_drop_ratio") < 1.0);
}
