// The cost model: a pure function from what the engine did (per-step operation counts) and the
// model's non-attention work to figures on the `model` clock, priced by a SoC profile. No I/O,
// no clocks: the same counts and profile always give the same figures.
//
// Per step, the work runs as a sequence of kernels (seal pages, select, attend, dense layers);
// each kernel takes the longer of its compute and its memory traffic when the profile says that
// transfers overlap compute, else their sum. L2 demand loads stall the step: a latency per round
// trip (per queue depth's worth of pages, at least one per wait of the engine), their bytes at
// the random page-read rate, and a wait behind the step's own demotion writes for the share of
// the step they keep the device busy. Background transfers - the prefetch issued after the
// previous step, demotions written during this one - hide behind this step's compute; what does
// not fit is the step's remaining wait. docs/cost-model.md has the equations and what they
// leave out.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "soc/soc_profile.h"
#include "telemetry.h"

namespace kv::soc {

// One decode step or one prefill chunk of the whole model.
struct StepOps {
  Phase phase = Phase::Decode;
  int request = 0;
  int tokens = 1;       // tokens the step processed (1 for decode, k + 1 for a speculative verify step)
  // Tokens it added to the output: -1 means `tokens`; speculative decoding's draft steps add 0,
  // its verify steps the committed tokens.
  int produced = -1;
  // Share of the model's dense work the step ran (a layers:N draft step: its layers and the
  // output head); 1 for every other step.
  double model_share = 1.0;
  OpCounts append;      // sealing pages (quantization, summaries)
  OpCounts attention;   // selection and attention calls, with their L2 traffic
  int produced_tokens() const { return produced < 0 ? tokens : produced; }
};

// The model outside attention, per token: every weight is read once per decode step (and
// once per prefill chunk, which multiplies it by the chunk's tokens).
struct ModelWork {
  std::uint64_t weight_bytes = 0;    // streamed per step (the multiplied weights)
  std::uint64_t resident_bytes = 0;  // held in memory (embeddings included)
  std::uint64_t macs_per_token = 0;
  WeightFormat format = WeightFormat::F16;
};

struct CostInput {
  std::vector<StepOps> steps;  // in execution order
  ModelWork model;
  std::uint64_t kv_resident_bytes = 0;  // peak L1 KV bytes of the whole model
  double ttft_target_ms = 0.0, tpot_target_ms = 0.0;  // 0: no target
};

// One step's modelled time, split as the span metrics are.
struct StepCost {
  double ms = 0.0;
  double kv_quant_ms = 0.0, select_ms = 0.0, attn_compute_ms = 0.0, model_compute_ms = 0.0, dma_wait_ms = 0.0;
  double energy_mj = 0.0;
};

struct PhaseCost {
  double total_ms = 0.0, kv_quant_ms = 0.0, select_ms = 0.0, attn_compute_ms = 0.0, model_compute_ms = 0.0,
         dma_wait_ms = 0.0, energy_mj = 0.0;
  int tokens = 0;
};

struct CostFigures {
  std::vector<StepCost> steps;
  std::vector<double> ttft_ms;  // per request with a prompt
  std::vector<double> tpot_ms;  // per decode step
  PhaseCost prefill, decode;
  double ttft_mean_ms = 0.0, prefill_tps = 0.0;
  double tpot_p50_ms = 0.0, tpot_p90_ms = 0.0, tpot_p99_ms = 0.0, decode_tps = 0.0;
  double goodput = 0.0;  // share of requests that met the targets
  double dma_wait_ms = 0.0;
  double energy_mj_per_token = 0.0;  // decode
  double energy_mj_prefill = 0.0;    // mean per request with a prompt
  // Memory view against the profile's budget for one model.
  std::uint64_t weight_bytes = 0, kv_bytes = 0, reserve_bytes = 0, budget_bytes = 0;
  bool fits_in_memory = false;
  double memory_headroom_bytes = 0.0;  // budget - (weights + KV + reserve); negative when it does not fit
};

// Round trips to the device a step's demand loads take: queue_depth pages at a time, and at
// least one per wait of the engine (at most one per page it loaded from the device).
double demand_round_trips(const OpCounts& ops, double queue_depth);

// Throws std::invalid_argument for a profile whose needed rates are not positive.
CostFigures price(const CostInput& input, const SocProfile& profile);

// The modelled time of one step given the background transfer left from the step before
// (exposed for tests): returns the cost and sets `prefetch_ms` to this step's own prefetch.
StepCost price_step(const StepOps& step, const ModelWork& model, const SocProfile& profile, double previous_prefetch_ms,
                    double& prefetch_ms);

}  // namespace kv::soc
