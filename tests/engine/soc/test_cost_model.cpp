// The cost model on hand-computed cases, and its monotonicity on random ones.
#include <catch2/catch.hpp>

#include <functional>
#include <random>

#include "soc/cost_model.h"

namespace {

using namespace kv::soc;

Quantity q(double v) { return Quantity{v, "", "test", ""}; }

// Round numbers: L1 10 GB/s, L0 100 GB/s, L2 random pages 0.5 GB/s at 100 us with 4 in flight
// and 50 us more behind a write;
// decode 100 GMAC/s, prefill 200, dense 50 (batched) / 20 (one token); no fixed costs.
SocProfile profile() {
  SocProfile p;
  p.name = "test";
  p.model_budget_bytes = q(8e9);
  p.memory_capacity_bytes = q(12e9);
  p.runtime_reserve_bytes = q(1e9);
  p.l0 = {q(8e6), q(100), q(100), q(0.01)};
  p.l1 = {q(12e9), q(10), q(10), q(0.1)};
  p.l2.capacity_bytes = q(256e9);
  p.l2.read_gb_per_s = q(1);
  p.l2.write_gb_per_s = q(1);
  p.l2.latency_us = q(100);
  p.l2.queue_depth = q(4);
  p.l2.random_read_4k_iops = q(1e5);
  p.l2.random_read_page_gb_per_s = q(0.5);
  p.l2.read_behind_write_us = q(50);
  EngineProfile& cpu = p.engines[0];
  cpu.present = true;
  for (auto& r : cpu.decode_gmac_per_s) r = q(100);
  for (auto& r : cpu.prefill_gmac_per_s) r = q(200);
  for (auto& r : cpu.quantize_gvalue_per_s) r = q(1);
  cpu.quest_bounds_gproduct_per_s = q(10);
  cpu.exp_g_per_s = q(10);
  for (auto& r : cpu.dense_gmac_per_s) r = q(50);
  for (auto& r : cpu.dense_decode_gmac_per_s) r = q(20);
  cpu.attention_call_us = q(0);
  cpu.context_page_ns = q(0);
  cpu.managed_page_ns = q(0);
  cpu.l2_page_us = q(0);
  cpu.select_call_us = q(0);
  p.energy.pj_per_byte = {q(1), q(10), q(100)};
  p.energy.pj_per_mac = {q(4), q(2), q(1), q(0.5)};
  p.energy.pj_per_exp = q(5);
  return p;
}

StepCost price_one(const StepOps& step, const ModelWork& model = {}, double previous_prefetch = 0.0) {
  double prefetch = 0.0;
  return price_step(step, model, profile(), previous_prefetch, prefetch);
}

constexpr auto F16 = kv::Format::F16;

}  // namespace

TEST_CASE("cost model: a decode step reading more than it computes is bandwidth-bound", "[cost_model]") {
  StepOps step;
  step.attention.read(kv::Tier::L1, F16, 100'000'000);  // 10 ms at 10 GB/s
  step.attention.mac(F16, 1'000'000);                   // 0.01 ms at 100 GMAC/s
  const StepCost c = price_one(step);
  CHECK(c.attn_compute_ms == Approx(10.0));
  CHECK(c.ms == Approx(10.0));
  CHECK(c.dma_wait_ms == 0.0);
}

TEST_CASE("cost model: a prefill chunk is compute-bound, and its dense layers are batched", "[cost_model]") {
  StepOps step;
  step.phase = kv::Phase::Prefill;
  step.tokens = 512;
  step.attention.mac(F16, 2'000'000'000);            // 10 ms at 200 GMAC/s
  step.attention.read(kv::Tier::L1, F16, 1'000'000);  // 0.1 ms
  ModelWork model;
  model.macs_per_token = 1'000'000;  // x 512 tokens at 50 GMAC/s: 10.24 ms
  model.weight_bytes = 1'000'000;    // read once for the chunk: 0.1 ms
  const StepCost c = price_one(step, model);
  CHECK(c.attn_compute_ms == Approx(10.0));
  CHECK(c.model_compute_ms == Approx(10.24));
  CHECK(c.ms == Approx(20.24));
}

TEST_CASE("cost model: without overlap, compute and transfers add up", "[cost_model]") {
  StepOps step;
  step.attention.read(kv::Tier::L1, F16, 100'000'000);
  step.attention.mac(F16, 1'000'000'000);  // 10 ms
  SocProfile p = profile();
  double prefetch = 0.0;
  CHECK(price_step(step, {}, p, 0.0, prefetch).ms == Approx(10.0));
  p.transfers_overlap_compute = false;
  CHECK(price_step(step, {}, p, 0.0, prefetch).ms == Approx(20.0));
}

TEST_CASE("cost model: a prefetch hides behind the next step's compute, a demand miss does not", "[cost_model]") {
  StepOps issuing;
  issuing.attention.prefetch_pages = 4;
  issuing.attention.prefetch_bytes = 4 * 65536;
  double prefetch_ms = 0.0;
  price_step(issuing, {}, profile(), 0.0, prefetch_ms);
  // One queue depth's worth: one latency, plus the bytes at the random page rate.
  CHECK(prefetch_ms == Approx(0.1 + 4 * 65536 / 0.5e6));

  StepOps next;
  next.attention.mac(F16, 1'000'000'000);  // 10 ms of compute: the prefetch is hidden
  const StepCost hidden = price_one(next, {}, prefetch_ms);
  CHECK(hidden.dma_wait_ms == 0.0);
  CHECK(hidden.ms == Approx(10.0));

  StepOps short_step;
  short_step.attention.mac(F16, 10'000'000);  // 0.1 ms: most of the prefetch shows
  const StepCost exposed = price_one(short_step, {}, prefetch_ms);
  CHECK(exposed.dma_wait_ms == Approx(prefetch_ms - 0.1));
  CHECK(exposed.ms == Approx(prefetch_ms));

  StepOps missing = next;
  missing.attention.demand_pages = 8;  // two rounds of 4 in flight
  missing.attention.demand_bytes = 8 * 65536;
  const StepCost stalled = price_one(missing);
  const double demand = 2 * 0.1 + 8 * 65536 / 0.5e6;
  CHECK(stalled.dma_wait_ms == Approx(demand));
  CHECK(stalled.ms == Approx(10.0 + demand));

  // A load of a page still in the write buffer is a DRAM copy, not a device read.
  missing.attention.demand_buffered = 8;
  const StepCost buffered = price_one(missing);
  CHECK(buffered.dma_wait_ms == Approx(8 * 65536 / 10e6));
  // A prefetch served from the buffer does not make a demand load free.
  missing.attention.demand_buffered = 0;
  missing.attention.prefetch_pages = 8;
  missing.attention.prefetch_bytes = 8 * 65536;
  missing.attention.prefetch_buffered = 8;
  CHECK(price_one(missing).dma_wait_ms == Approx(demand));
}

TEST_CASE("cost model: demand loads take a round trip per wait and wait behind the step's demotion writes while they keep the device busy", "[cost_model]") {
  StepOps step;
  step.attention.mac(F16, 1'000'000'000);  // 10 ms of compute
  step.attention.demand_pages = 8;         // two rounds of 4 in flight
  step.attention.demand_bytes = 8 * 65536;
  const double demand = 2 * 0.1 + 8 * 65536 / 0.5e6;
  CHECK(price_one(step).dma_wait_ms == Approx(demand));
  // Loaded in five separate waits: five round trips, not two.
  StepOps waited = step;
  waited.attention.demand_waits = 5;
  CHECK(price_one(waited).dma_wait_ms == Approx(5 * 0.1 + 8 * 65536 / 0.5e6));

  step.attention.write(kv::Tier::L2, F16, 2'000'000);  // 2 ms of writes, hidden behind the compute
  const double busy = 2.0 / (10.0 + demand);
  const StepCost behind = price_one(step);
  CHECK(behind.dma_wait_ms == Approx(demand + 2 * busy * 0.05));
  CHECK(behind.ms == Approx(10.0 + demand + 2 * busy * 0.05));

  // Reads served from the write buffer never reach the device: no wait behind its writes, and
  // no round trip even where a count (scaled, rounded) still says the engine waited.
  step.attention.demand_buffered = 8;
  CHECK(price_one(step).dma_wait_ms == Approx(8 * 65536 / 10e6));
  step.attention.demand_waits = 3;
  CHECK(price_one(step).dma_wait_ms == Approx(8 * 65536 / 10e6));
  CHECK(demand_round_trips(step.attention, 4) == 0.0);
  step.attention.demand_buffered = 6;  // two pages from the device: at most two round trips
  CHECK(demand_round_trips(step.attention, 4) == 2.0);
  step.attention.demand_waits = 0;

  // Never longer than the writes themselves.
  step.attention.demand_buffered = 0;
  StepOps tiny = step;
  tiny.attention = {};
  tiny.attention.demand_pages = 8;
  tiny.attention.demand_bytes = 8 * 65536;
  tiny.attention.write(kv::Tier::L2, F16, 1000);  // 1 us of writes
  SocProfile slow_behind = profile();
  slow_behind.l2.read_behind_write_us = q(1e6);
  double prefetch = 0.0;
  CHECK(price_step(tiny, {}, slow_behind, 0.0, prefetch).dma_wait_ms == Approx(demand + 0.001 + 0.001));
}

TEST_CASE("cost model: energy of a known byte count", "[cost_model]") {
  StepOps step;
  step.attention.read(kv::Tier::L1, F16, 1'000'000);  // 10 pJ/byte
  step.attention.read(kv::Tier::L2, F16, 1'000);      // 100 pJ/byte
  step.attention.mac(F16, 1'000);                      // 2 pJ each (f16)
  const StepCost c = price_one(step);
  CHECK(c.energy_mj == Approx((1e7 + 1e5 + 2e3) * 1e-9));
}

TEST_CASE("cost model: speculative draft steps add no token, a verify step's tokens share the round's time", "[cost_model]") {
  CostInput input;
  for (int i = 0; i < 3; ++i) {  // three draft steps of 1 ms, no token
    StepOps draft;
    draft.produced = 0;
    draft.attention.mac(F16, 100'000'000);
    input.steps.push_back(draft);
  }
  StepOps verify;  // four queries, two tokens committed: 2 ms
  verify.tokens = 4;
  verify.produced = 2;
  verify.attention.mac(F16, 200'000'000);
  input.steps.push_back(verify);
  const CostFigures f = price(input, profile());
  CHECK(f.decode.tokens == 2);
  REQUIRE(f.tpot_ms.size() == 2);
  CHECK(f.tpot_ms[0] == Approx(f.decode.total_ms / 2));
  CHECK(f.tpot_ms[1] == Approx(f.tpot_ms[0]));
  CHECK(f.decode_tps == Approx(2 / (f.decode.total_ms * 1e-3)));
}

TEST_CASE("cost model: per-case figures, goodput and the memory view", "[cost_model]") {
  CostInput input;
  for (int request = 0; request < 2; ++request) {
    StepOps prefill;
    prefill.phase = kv::Phase::Prefill;
    prefill.request = request;
    prefill.tokens = 100;
    prefill.attention.mac(F16, 200'000'000 * (request + 1));  // 1 ms, then 2 ms
    input.steps.push_back(prefill);
    for (int i = 0; i < 4; ++i) {
      StepOps decode;
      decode.request = request;
      decode.attention.mac(F16, 100'000'000 * (i + 1));  // 1, 2, 3, 4 ms
      input.steps.push_back(decode);
    }
  }
  input.ttft_target_ms = 1.5;  // the first request meets it, the second does not
  input.model.resident_bytes = 6'000'000'000;
  input.kv_resident_bytes = 500'000'000;
  const CostFigures f = price(input, profile());
  CHECK(f.ttft_ms.size() == 2);
  CHECK(f.ttft_mean_ms == Approx(1.5));
  CHECK(f.prefill_tps == Approx(200 / 3e-3));
  CHECK(f.tpot_ms.size() == 8);
  CHECK(f.tpot_p50_ms == Approx(2.0));
  CHECK(f.tpot_p99_ms == Approx(4.0));
  CHECK(f.decode_tps == Approx(8 / 20e-3));
  CHECK(f.goodput == Approx(0.5));
  CHECK(f.fits_in_memory);
  CHECK(f.memory_headroom_bytes == Approx(8e9 - 6e9 - 0.5e9 - 1e9));
  input.model.resident_bytes = 7'000'000'000;
  const CostFigures tight = price(input, profile());
  CHECK_FALSE(tight.fits_in_memory);
  CHECK(tight.memory_headroom_bytes == Approx(-0.5e9));
  // A tpot target against the requests' mean decode step (2.5 ms each).
  input.ttft_target_ms = 0.0;
  input.tpot_target_ms = 2.5;
  CHECK(price(input, profile()).goodput == Approx(1.0));
  input.tpot_target_ms = 2.4;
  CHECK(price(input, profile()).goodput == Approx(0.0));
  // Requests without a prompt (teacher-forced decoding) are not counted, as on the host clock.
  CostInput decode_only;
  for (int i = 0; i < 3; ++i) {
    StepOps decode;
    decode.attention.mac(F16, 100'000'000);
    decode_only.steps.push_back(decode);
  }
  decode_only.tpot_target_ms = 5.0;
  const CostFigures none = price(decode_only, profile());
  CHECK(none.ttft_ms.empty());
  CHECK(none.goodput == 0.0);
}

TEST_CASE("cost model: more bandwidth or compute never makes a step slower", "[cost_model]") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::uint64_t> count(0, 50'000'000);
  const auto random_step = [&] {
    StepOps s;
    s.phase = rng() % 2 ? kv::Phase::Decode : kv::Phase::Prefill;
    s.tokens = s.phase == kv::Phase::Decode ? 1 : 1 + static_cast<int>(rng() % 512);
    for (kv::Format f : kv::kAllFormats) {
      s.attention.mac(f, count(rng));
      s.attention.read(kv::Tier::L1, f, count(rng));
      s.append.quantized_values[static_cast<int>(f)] = count(rng) / 100;
    }
    s.append.write(kv::Tier::L1, F16, count(rng));
    s.attention.write(kv::Tier::L0, F16, count(rng));
    s.attention.write(kv::Tier::L2, F16, count(rng) / 10);
    s.attention.softmax_exps = count(rng) / 10;
    s.attention.bound_products = count(rng);
    s.attention.attention_calls = rng() % 64;
    s.attention.demand_pages = rng() % 32;
    s.attention.demand_bytes = s.attention.demand_pages * 65536;
    s.attention.demand_buffered = rng() % 8;
    s.attention.demand_waits = rng() % 16;
    s.attention.prefetch_pages = rng() % 32;
    s.attention.prefetch_bytes = s.attention.prefetch_pages * 65536;
    return s;
  };
  std::vector<std::function<void(SocProfile&)>> faster = {
      [](SocProfile& p) { p.l1.read_gb_per_s.value *= 2; },
      [](SocProfile& p) { p.l1.write_gb_per_s.value *= 2; },
      [](SocProfile& p) { p.l0.write_gb_per_s.value *= 2; },
      [](SocProfile& p) { p.l2.write_gb_per_s.value *= 2; },
      [](SocProfile& p) { p.l2.random_read_page_gb_per_s.value *= 2; },
      [](SocProfile& p) { p.l2.queue_depth.value *= 2; },
      [](SocProfile& p) { p.l2.latency_us.value /= 2; },
      [](SocProfile& p) { p.l2.read_behind_write_us.value /= 2; },
      [](SocProfile& p) { for (auto& r : p.engines[0].decode_gmac_per_s) r.value *= 2; },
      [](SocProfile& p) { for (auto& r : p.engines[0].prefill_gmac_per_s) r.value *= 2; },
      [](SocProfile& p) { for (auto& r : p.engines[0].quantize_gvalue_per_s) r.value *= 2; },
      [](SocProfile& p) { for (auto& r : p.engines[0].dense_gmac_per_s) r.value *= 2; },
      [](SocProfile& p) { for (auto& r : p.engines[0].dense_decode_gmac_per_s) r.value *= 2; },
      [](SocProfile& p) { p.engines[0].exp_g_per_s.value *= 2; },
      [](SocProfile& p) { p.engines[0].quest_bounds_gproduct_per_s.value *= 2; },
  };
  ModelWork model;
  model.macs_per_token = 1'000'000;
  model.weight_bytes = 2'000'000;
  for (int trial = 0; trial < 200; ++trial) {
    CostInput input;
    input.model = model;
    for (int i = 0; i < 4; ++i) input.steps.push_back(random_step());
    const SocProfile base = profile();
    const CostFigures before = price(input, base);
    for (std::size_t k = 0; k < faster.size(); ++k) {
      SocProfile better = base;
      faster[k](better);
      const CostFigures after = price(input, better);
      INFO("trial " << trial << ", change " << k);
      for (std::size_t s = 0; s < before.steps.size(); ++s) CHECK(after.steps[s].ms <= before.steps[s].ms * (1 + 1e-12));
    }
  }
}
