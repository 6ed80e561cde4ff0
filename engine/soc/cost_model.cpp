#include "soc/cost_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>

namespace kv::soc {

namespace {

// Milliseconds for `count` operations at `rate` giga-operations (or GB) per second.
double ms_at(double count, const Quantity& rate, const char* what) {
  if (count <= 0.0) return 0.0;
  if (!(rate.value > 0.0)) throw std::invalid_argument(std::string("cost model: the profile's ") + what + " is not positive");
  return count / (rate.value * 1e6);
}

double combine(double compute_ms, double transfer_ms, bool overlap) {
  return overlap ? std::max(compute_ms, transfer_ms) : compute_ms + transfer_ms;
}

std::uint64_t sum(const std::array<std::uint64_t, kFormatCount>& row) {
  std::uint64_t s = 0;
  for (std::uint64_t v : row) s += v;
  return s;
}

double bytes_on(const OpCounts& ops, Tier tier, bool read) {
  return static_cast<double>(sum(read ? ops.bytes_read[static_cast<int>(tier)] : ops.bytes_written[static_cast<int>(tier)]));
}

double nearest_rank(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
  return values[std::clamp<std::size_t>(rank, 1, values.size()) - 1];
}

double energy_pj(const OpCounts& ops, const EnergyProfile& e) {
  double pj = 0.0;
  for (int t = 0; t < kTierCount; ++t) {
    pj += static_cast<double>(sum(ops.bytes_read[t]) + sum(ops.bytes_written[t])) * e.pj_per_byte[t].value;
  }
  for (Format f : kAllFormats) {
    const auto i = static_cast<int>(f);
    // A quantized value costs about one multiply-add of its format (scale, round, pack).
    pj += static_cast<double>(ops.macs[i] + ops.quantized_values[i]) * e.pj_per_mac[static_cast<int>(energy_class(f))].value;
  }
  pj += static_cast<double>(ops.bound_products) * e.pj_per_mac[static_cast<int>(WeightFormat::F32)].value;
  pj += static_cast<double>(ops.softmax_exps) * e.pj_per_exp.value;
  return pj;
}

double device_pages(std::uint64_t pages, std::uint64_t buffered) { return static_cast<double>(pages - std::min(buffered, pages)); }

double round_trips(double pages, double waits, double queue_depth) {
  if (pages <= 0.0) return 0.0;
  return std::max(std::min(waits, pages), std::ceil(pages / std::max(1.0, queue_depth)));
}

}  // namespace

double demand_round_trips(const OpCounts& ops, double queue_depth) {
  return round_trips(device_pages(ops.demand_pages, ops.demand_buffered), static_cast<double>(ops.demand_waits), queue_depth);
}

StepCost price_step(const StepOps& step, const ModelWork& model, const SocProfile& profile, double previous_prefetch_ms,
                    double& prefetch_ms) {
  const bool decode = step.phase == Phase::Decode;
  const EngineProfile& engine = profile.engine(decode ? profile.decode_engine : profile.prefill_engine);
  if (!engine.present) throw std::invalid_argument("cost model: the profile runs a phase on an engine it does not describe");
  const bool overlap = profile.transfers_overlap_compute;
  StepCost cost;

  // Sealing pages: quantization at its rate, reading the residual and writing the page.
  double quant_compute = 0.0;
  for (Format f : kAllFormats) {
    const auto i = static_cast<int>(f);
    quant_compute += ms_at(static_cast<double>(step.append.quantized_values[i]), engine.quantize_gvalue_per_s[i], "quantize rate");
  }
  const double quant_transfer = ms_at(bytes_on(step.append, Tier::L1, true), profile.l1.read_gb_per_s, "L1 read bandwidth") +
                                ms_at(bytes_on(step.append, Tier::L1, false), profile.l1.write_gb_per_s, "L1 write bandwidth");
  cost.kv_quant_ms = combine(quant_compute, quant_transfer, overlap);

  // Selection: Quest bounds over the page summaries.
  cost.select_ms = ms_at(static_cast<double>(step.attention.bound_products), engine.quest_bounds_gproduct_per_s, "Quest bounds rate");
  if (step.attention.bound_products > 0) cost.select_ms += static_cast<double>(step.attention.selections) * engine.select_call_us.value * 1e-3;

  // Attention: multiply-adds per stored format, exponentials and a fixed cost per call, against
  // the pages read from L1 and staged through L0.
  const OpCounts& a = step.attention;
  double attn_compute = static_cast<double>(a.attention_calls) * engine.attention_call_us.value * 1e-3 +
                        static_cast<double>(a.context_pages) * engine.context_page_ns.value * 1e-6 +
                        static_cast<double>(a.managed_pages) * engine.managed_page_ns.value * 1e-6 +
                        static_cast<double>(a.demand_pages + a.prefetch_pages + a.demoted_pages) * engine.l2_page_us.value * 1e-3;
  for (Format f : kAllFormats) {
    const auto i = static_cast<int>(f);
    attn_compute += ms_at(static_cast<double>(a.macs[i]), decode ? engine.decode_gmac_per_s[i] : engine.prefill_gmac_per_s[i],
                          decode ? "decode attention rate" : "prefill attention rate");
  }
  attn_compute += ms_at(static_cast<double>(a.softmax_exps), engine.exp_g_per_s, "exponential rate");
  const double attn_transfer = ms_at(bytes_on(a, Tier::L1, true), profile.l1.read_gb_per_s, "L1 read bandwidth") +
                               ms_at(bytes_on(a, Tier::L0, false), profile.l0.write_gb_per_s, "L0 write bandwidth");
  cost.attn_compute_ms = combine(attn_compute, attn_transfer, overlap);

  // Dense layers: every weight streamed once per step, multiply-adds for each token (a step that
  // runs part of the model, a layers:N draft's, its share of both).
  const auto wf = static_cast<int>(model.format);
  const double dense_macs = static_cast<double>(model.macs_per_token) * step.model_share;
  const double dense_bytes = static_cast<double>(model.weight_bytes) * step.model_share;
  const double dense_compute = ms_at(dense_macs * step.tokens,
                                     step.tokens == 1 ? engine.dense_decode_gmac_per_s[wf] : engine.dense_gmac_per_s[wf],
                                     "dense rate");
  const double dense_transfer = ms_at(dense_bytes, profile.l1.read_gb_per_s, "L1 read bandwidth");
  cost.model_compute_ms = combine(dense_compute, dense_transfer, overlap);

  // L2: demand loads stall; prefetches and demotions run in the background. Reads the store
  // served from its write buffers (pages not yet on the device) are DRAM copies; the device's
  // cost a latency per round trip (demand_round_trips) and their bytes at the page-read rate.
  const auto reads_ms = [&](std::uint64_t pages, std::uint64_t bytes, std::uint64_t buffered, double rounds) {
    const double from_device = device_pages(pages, buffered);
    const double share = pages > 0 ? from_device / static_cast<double>(pages) : 0.0;
    const double ms = ms_at(static_cast<double>(bytes) * (1.0 - share), profile.l1.read_gb_per_s, "L1 read bandwidth");
    if (from_device <= 0.0) return ms;
    return ms + rounds * profile.l2.latency_us.value * 1e-3 +
           ms_at(static_cast<double>(bytes) * share, profile.l2.random_read_page_gb_per_s, "L2 random page-read bandwidth");
  };
  const double demand_rounds = demand_round_trips(a, profile.l2.queue_depth.value);
  double demand_ms = reads_ms(a.demand_pages, a.demand_bytes, a.demand_buffered, demand_rounds);
  prefetch_ms = reads_ms(a.prefetch_pages, a.prefetch_bytes, a.prefetch_buffered,
                         round_trips(device_pages(a.prefetch_pages, a.prefetch_buffered), 0.0, profile.l2.queue_depth.value));
  const double writes_ms = ms_at(bytes_on(a, Tier::L2, false) + bytes_on(step.append, Tier::L2, false), profile.l2.write_gb_per_s,
                                 "L2 write bandwidth");
  const double compute = cost.kv_quant_ms + cost.select_ms + cost.attn_compute_ms + cost.model_compute_ms;
  const double background = previous_prefetch_ms + writes_ms;
  const double exposed = overlap ? std::max(0.0, background - compute) : background;
  // Each round of demand reads finds the device writing for the share of the step the step's
  // demotions keep it busy (never above 1: the step lasts at least as long as its writes), and
  // then waits behind the write on it; never longer than the writes.
  if (writes_ms > 0.0 && demand_rounds > 0.0) {
    const double busy = writes_ms / (compute + demand_ms + exposed);
    demand_ms += std::min(writes_ms, demand_rounds * busy * profile.l2.read_behind_write_us.value * 1e-3);
  }
  cost.dma_wait_ms = demand_ms + exposed;
  cost.ms = compute + cost.dma_wait_ms;

  OpCounts all = step.append;
  all += step.attention;
  double pj = energy_pj(all, profile.energy);
  pj += dense_bytes * profile.energy.pj_per_byte[static_cast<int>(Tier::L1)].value;
  pj += dense_macs * step.tokens * profile.energy.pj_per_mac[wf].value;
  cost.energy_mj = pj * 1e-9;
  return cost;
}

CostFigures price(const CostInput& input, const SocProfile& profile) {
  CostFigures out;
  out.steps.reserve(input.steps.size());
  double carried_prefetch = 0.0;
  std::map<int, double> ttft, prefill_energy;
  std::map<int, std::pair<double, int>> request_decode;
  double decode_pending_ms = 0.0;
  for (const StepOps& step : input.steps) {
    double prefetch = 0.0;
    const StepCost cost = price_step(step, input.model, profile, carried_prefetch, prefetch);
    carried_prefetch = prefetch;
    out.steps.push_back(cost);
    PhaseCost& phase = step.phase == Phase::Prefill ? out.prefill : out.decode;
    phase.total_ms += cost.ms;
    phase.kv_quant_ms += cost.kv_quant_ms;
    phase.select_ms += cost.select_ms;
    phase.attn_compute_ms += cost.attn_compute_ms;
    phase.model_compute_ms += cost.model_compute_ms;
    phase.dma_wait_ms += cost.dma_wait_ms;
    phase.energy_mj += cost.energy_mj;
    const int produced = step.produced_tokens();
    phase.tokens += produced;
    if (step.phase == Phase::Prefill) {
      ttft[step.request] += cost.ms;
      prefill_energy[step.request] += cost.energy_mj;
    } else {
      // A token's latency is the steps' since the last token, shared by the tokens a step
      // produced (speculative decoding: draft steps produce none, a verify step several).
      decode_pending_ms += cost.ms;
      auto& [ms, steps] = request_decode[step.request];
      ms += cost.ms;
      steps += produced;
      for (int i = 0; i < produced; ++i) out.tpot_ms.push_back(decode_pending_ms / produced);
      if (produced > 0) decode_pending_ms = 0.0;
    }
  }
  for (const auto& [request, ms] : ttft) out.ttft_ms.push_back(ms);
  double sum_ttft = 0.0, sum_energy = 0.0;
  for (double ms : out.ttft_ms) sum_ttft += ms;
  for (const auto& [request, mj] : prefill_energy) sum_energy += mj;
  if (!out.ttft_ms.empty()) {
    out.ttft_mean_ms = sum_ttft / static_cast<double>(out.ttft_ms.size());
    out.energy_mj_prefill = sum_energy / static_cast<double>(out.ttft_ms.size());
  }
  if (out.prefill.total_ms > 0.0) out.prefill_tps = out.prefill.tokens / (out.prefill.total_ms * 1e-3);
  out.tpot_p50_ms = nearest_rank(out.tpot_ms, 50.0);
  out.tpot_p90_ms = nearest_rank(out.tpot_ms, 90.0);
  out.tpot_p99_ms = nearest_rank(out.tpot_ms, 99.0);
  if (out.decode.total_ms > 0.0) out.decode_tps = out.decode.tokens / (out.decode.total_ms * 1e-3);
  if (out.decode.tokens > 0) out.energy_mj_per_token = out.decode.energy_mj / out.decode.tokens;
  out.dma_wait_ms = out.prefill.dma_wait_ms + out.decode.dma_wait_ms;

  // Goodput, as on the host clock: the requests with a prompt, each against the targets that
  // apply (its ttft, and its mean decode step when it decodes).
  std::map<int, bool> met;
  for (const auto& [request, ms] : ttft) met[request] = input.ttft_target_ms <= 0.0 || ms <= input.ttft_target_ms;
  for (const auto& [request, entry] : request_decode) {
    const auto it = met.find(request);
    if (it == met.end() || entry.second == 0) continue;
    it->second = it->second && (input.tpot_target_ms <= 0.0 || entry.first / entry.second <= input.tpot_target_ms);
  }
  int good = 0;
  for (const auto& [request, ok] : met) good += ok ? 1 : 0;
  out.goodput = met.empty() ? 0.0 : static_cast<double>(good) / static_cast<double>(met.size());

  out.weight_bytes = input.model.resident_bytes;
  out.kv_bytes = input.kv_resident_bytes;
  out.reserve_bytes = static_cast<std::uint64_t>(profile.runtime_reserve_bytes.value);
  out.budget_bytes = static_cast<std::uint64_t>(profile.model_budget_bytes.value);
  const double used = static_cast<double>(out.weight_bytes) + static_cast<double>(out.kv_bytes) + static_cast<double>(out.reserve_bytes);
  out.memory_headroom_bytes = static_cast<double>(out.budget_bytes) - used;
  out.fits_in_memory = out.memory_headroom_bytes >= 0.0;
  return out;
}

}  // namespace kv::soc
