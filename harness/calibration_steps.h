// The measurements of `kvbench calibrate`, one function per quantity of the host profile: each
// times the engine's own calls through Google Benchmark's runner (bench/benchmark_session.h) on
// the registry's cases (bench/cases/kernel_cases.h), fits rates (calibration_fits.h) and writes
// the profile's figures, each saying how it was measured.
#pragma once

#include <functional>
#include <string>

#include "benchmark_session.h"
#include "host_calibration.h"
#include "soc/soc_profile.h"
#include "telemetry.h"

namespace kvbench::calibration {

struct Calibration {
  const CalibrationOptions& options;
  int threads = 0;                 // the engine pool's size
  micro::BenchmarkSession session;  // min_seconds, three repetitions, medians
  void say(const std::string& line) const {
    if (options.progress) options.progress(line);
  }
};

kv::soc::Quantity measured(double value, const std::string& unit, const std::string& how);

// Sums the operation counts of decode calls (the cost model's view of them).
class DecodeOps final : public kv::Telemetry {
 public:
  kv::OpCounts ops;
  double device_rounds = 0.0;  // round trips of the demand loads, call by call as the model counts them
  void on_page_sealed(const kv::PageSealed&) override {}
  void on_nan_inf(int, std::uint64_t) override {}
  void on_kernel(kv::KernelKind, kv::Isa) override {}
  void on_ops(kv::Phase phase, const kv::OpCounts& counts) override;
  double calls() const;
};

// What the swapping decode waited for L2 loads, for the latency the engine sees.
struct SwapWaits {
  double waited_s = 0.0, device_loads = 0.0, device_bytes = 0.0;
  double device_rounds = 0.0;  // per call: round trips to the device, as the cost model counts them
  double written_bytes = 0.0, call_s = 0.0;  // per call: demotions written, the call's time
};

// Memory (calibrate_memory.cpp).
void memory_capacity(kv::soc::SocProfile& p);
void dram_bandwidth(Calibration& c, kv::soc::SocProfile& p);
void dram_latency(Calibration& c, kv::soc::SocProfile& p);
void on_chip_memory(Calibration& c, kv::soc::SocProfile& p);
SwapWaits l2_page_bookkeeping(Calibration& c, kv::soc::SocProfile& p);
void l2_device(Calibration& c, kv::soc::SocProfile& p, const SwapWaits& swap);

// Compute (calibrate_compute.cpp).
void exponentials(Calibration& c, kv::soc::EngineProfile& cpu);
void attention_rates(Calibration& c, kv::soc::EngineProfile& cpu);
void page_sealing(Calibration& c, kv::soc::EngineProfile& cpu);
void selection(Calibration& c, kv::soc::EngineProfile& cpu);
void decode_bookkeeping(Calibration& c, kv::soc::SocProfile& p);
void dense_layers(Calibration& c, kv::soc::EngineProfile& cpu);

}  // namespace kvbench::calibration
