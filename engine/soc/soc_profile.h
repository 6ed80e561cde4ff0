// A SoC profile: what the cost model needs to know about a phone, a board or this host -
// capacities, sustained bandwidths and latencies per memory tier, achieved kernel rates per
// compute engine, which engine runs which phase, and energy per byte and per operation.
// Every number carries its unit and where it comes from (a cited source, or how it was derived
// from sourced numbers); harness/soc_profiles parses configs/socs/*.json into this struct.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "quant/format.h"

namespace kv::soc {

struct Quantity {
  double value = 0.0;
  std::string unit;
  std::string source;   // a citation, or
  std::string derived;  // how it follows from sourced numbers
};

struct TierProfile {
  Quantity capacity_bytes;
  Quantity read_gb_per_s;   // sustained, decimal GB/s
  Quantity write_gb_per_s;
  Quantity latency_us;      // one access of a page-sized request
};

// Flash adds what random page reads cost.
struct FlashProfile : TierProfile {
  Quantity queue_depth;             // requests in flight the device serves in parallel
  Quantity random_read_4k_iops;
  Quantity random_read_page_gb_per_s;  // random reads of KV-page-sized requests
  // What one page read waits longer while the device writes without pause: a write already on
  // the device is not preempted by reads sent first.
  Quantity read_behind_write_us;
};

// Dense layers are priced by the precision of their weights.
enum class WeightFormat : std::uint8_t { F32, F16, Q8, Q4 };
inline constexpr int kWeightFormatCount = 4;
inline constexpr const char* kWeightFormatNames[kWeightFormatCount] = {"f32", "f16", "q8", "q4"};

inline constexpr int kFormats = 6;  // kv::kAllFormats, indexed by static_cast<int>(Format)

// Achieved rates of the kernels kvbench runs (not instruction peaks), in giga-operations per
// second for the whole engine (all its cores).
struct EngineProfile {
  bool present = false;
  std::array<Quantity, kFormats> decode_gmac_per_s;   // fused decode attention, K and V in the format
  std::array<Quantity, kFormats> prefill_gmac_per_s;  // chunked prefill attention
  std::array<Quantity, kFormats> quantize_gvalue_per_s;  // sealing pages: values per second
  Quantity quest_bounds_gproduct_per_s;                  // selection: bound products per second
  Quantity exp_g_per_s;                                  // softmax exponentials
  std::array<Quantity, kWeightFormatCount> dense_gmac_per_s;  // dense layers, batched (prefill)
  std::array<Quantity, kWeightFormatCount> dense_decode_gmac_per_s;  // one token (matrix-vector)
  Quantity attention_call_us;  // fixed cost of one attention call: dispatch, page views, merge
  Quantity context_page_ns;    // per context page of a decode call (selection history, views)
  Quantity managed_page_ns;    // per page an L1-capped pool manages in a decode call
  Quantity l2_page_us;         // engine work per page moved between L1 and L2 (copies, checksums, tables)
  Quantity select_call_us;     // fixed cost of one selection (bounds and plan) besides its products
  // Spec-sheet peaks are not sustained rates: the engine's peak multiply-adds per second in its
  // fastest precision, and the share of it the kernels above sustain (from a cited sustained
  // measurement, or an estimate that says why). No rate above may exceed the peak.
  Quantity peak_gmac_per_s;
  Quantity efficiency;  // 0 < efficiency <= 1
};

enum class EngineKind : std::uint8_t { Cpu, Gpu, Npu };
inline constexpr int kEngineCount = 3;
inline constexpr const char* kEngineNames[kEngineCount] = {"cpu", "gpu", "npu"};

struct EnergyProfile {
  std::array<Quantity, 3> pj_per_byte;  // L0, L1, L2 (reads and writes)
  std::array<Quantity, kWeightFormatCount> pj_per_mac;  // by operand precision class
  Quantity pj_per_exp;
};

struct SocProfile {
  std::string name, description;
  Quantity memory_capacity_bytes;  // installed DRAM
  Quantity model_budget_bytes;     // what the OS and apps leave for one model
  Quantity runtime_reserve_bytes;  // activations, runtime and buffers beside weights and KV
  TierProfile l0, l1;
  FlashProfile l2;
  std::array<EngineProfile, kEngineCount> engines;
  EngineKind prefill_engine = EngineKind::Cpu, decode_engine = EngineKind::Cpu;
  bool transfers_overlap_compute = true;
  EnergyProfile energy;
  // Where it came from (builtin, or the file) and the hash of its text: a run records both.
  std::string origin, hash;

  const EngineProfile& engine(EngineKind kind) const { return engines[static_cast<int>(kind)]; }
};

// The precision class a KV format's multiply-adds are priced at for energy.
inline WeightFormat energy_class(Format format) {
  switch (format) {
    case Format::F32: return WeightFormat::F32;
    case Format::F16: return WeightFormat::F16;
    case Format::FP8:
    case Format::Q8: return WeightFormat::Q8;
    case Format::Q4:
    case Format::Q2: return WeightFormat::Q4;
  }
  return WeightFormat::F32;
}

}  // namespace kv::soc
