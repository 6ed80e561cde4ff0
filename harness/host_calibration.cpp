#include "host_calibration.h"

#include <fmt/format.h>

#include <algorithm>

#include "bench_common.h"
#include "build_info.h"
#include "calibration_steps.h"
#include "machine.h"
#include "memory/l2_store.h"
#include "runtime/isa.h"
#include "runtime/thread_pool.h"
#include "soc/cost_model.h"

namespace kvbench {

namespace calibration {

kv::soc::Quantity measured(double value, const std::string& unit, const std::string& how) {
  return kv::soc::Quantity{value, unit, "", "measured by kvbench calibrate: " + how};
}

void DecodeOps::on_ops(kv::Phase phase, const kv::OpCounts& counts) {
  if (phase != kv::Phase::Decode) return;
  ops += counts;
  device_rounds += kv::soc::demand_round_trips(counts, kv::L2Config{}.queue_depth);
}

double DecodeOps::calls() const { return static_cast<double>(std::max<std::uint64_t>(ops.attention_calls, 1)); }

}  // namespace calibration

namespace {

using kv::soc::Quantity;

// Energy: this host has no counters kvbench reads; per-operation estimates from a published
// survey (45 nm figures: an upper bound for a modern CPU).
void energy_estimates(kv::soc::SocProfile& p) {
  const std::string horowitz = "M. Horowitz, Computing's energy problem (and what we can do about it), ISSCC 2014, 45 nm";
  p.energy.pj_per_byte[1] = Quantity{160.0, "pJ/byte", "", "derived from " + horowitz + ": DRAM 32-bit read 640 pJ / 4 bytes"};
  p.energy.pj_per_byte[0] = Quantity{1.25, "pJ/byte", "", "derived from " + horowitz + ": 8 KB SRAM 32-bit read 5 pJ / 4 bytes"};
  p.energy.pj_per_byte[2] = Quantity{1700.0, "pJ/byte", "", "estimate: an NVMe SSD reading 3 GB/s at about 5 W active power (5 J/s / 3e9 B/s)"};
  p.energy.pj_per_mac[0] = Quantity{4.6, "pJ/MAC", "", "derived from " + horowitz + ": fp32 multiply 3.7 pJ + add 0.9 pJ"};
  p.energy.pj_per_mac[1] = Quantity{1.5, "pJ/MAC", "", "derived from " + horowitz + ": fp16 multiply 1.1 pJ + add 0.4 pJ"};
  p.energy.pj_per_mac[2] = Quantity{0.23, "pJ/MAC", "", "derived from " + horowitz + ": int8 multiply 0.2 pJ + add 0.03 pJ"};
  p.energy.pj_per_mac[3] = Quantity{0.12, "pJ/MAC", "", "estimate: half the int8 figure (4-bit operands) from " + horowitz};
  p.energy.pj_per_exp = Quantity{46.0, "pJ", "", "estimate: about ten fp32 multiply-adds for a polynomial exp, from " + horowitz};
}

// Calibrated rates are sustained by construction: the peak is the fastest kernel measured.
void peak(kv::soc::EngineProfile& cpu) {
  double fastest = 0.0;
  for (const auto* rates : {&cpu.decode_gmac_per_s, &cpu.prefill_gmac_per_s}) {
    for (const Quantity& q : *rates) fastest = std::max(fastest, q.value);
  }
  for (const auto* rates : {&cpu.dense_gmac_per_s, &cpu.dense_decode_gmac_per_s}) {
    for (const Quantity& q : *rates) fastest = std::max(fastest, q.value);
  }
  cpu.peak_gmac_per_s = Quantity{fastest, "GMAC/s", "",
                                 "measured by kvbench calibrate: the fastest kernel rate above (this host's peak is not read from a spec sheet)"};
  cpu.efficiency = Quantity{1.0, "ratio", "", "derived: every rate of this profile is a sustained measurement, not a share of a peak"};
}

}  // namespace

kv::soc::SocProfile calibrate_host(const CalibrationOptions& options) {
  using namespace calibration;
  // The benchmark bodies read the pool size and the L2 directory from the micro options.
  micro::options().threads = options.threads;
  micro::options().isa = kv::Isa::Auto;
  micro::options().l2_dir = options.l2_dir;
  Calibration c{options, kv::ThreadPool(options.threads).size(), micro::BenchmarkSession(options.min_seconds)};

  kv::soc::SocProfile p;
  p.name = "host";
  p.description = fmt::format("This machine, measured by kvbench calibrate: {}, {} threads, kernels {}, kvbench {}", machine_info().cpu_model,
                              c.threads, kv::isa_name(kv::best_isa()), KVBENCH_GIT_SHA);
  auto& cpu = p.engines[static_cast<int>(kv::soc::EngineKind::Cpu)];
  cpu.present = true;
  p.prefill_engine = p.decode_engine = kv::soc::EngineKind::Cpu;
  p.transfers_overlap_compute = true;

  memory_capacity(p);
  dram_bandwidth(c, p);
  dram_latency(c, p);
  on_chip_memory(c, p);
  exponentials(c, cpu);
  attention_rates(c, cpu);
  page_sealing(c, cpu);
  selection(c, cpu);
  decode_bookkeeping(c, p);
  const SwapWaits swap = l2_page_bookkeeping(c, p);
  dense_layers(c, cpu);
  l2_device(c, p, swap);
  micro::release_cold_contexts();
  energy_estimates(p);
  peak(cpu);
  return p;
}

}  // namespace kvbench
