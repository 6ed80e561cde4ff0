// The tiers of the heterogeneous memory pool.
#pragma once

#include <cstdint>
#include <string_view>

namespace kv {

enum class Tier : std::uint8_t {
  L0,  // on-chip SRAM/TCM stand-in: the current step's staged pages
  L1,  // DRAM arena with a hard capacity
  L2,  // flash stand-in: real files
};
inline constexpr int kTierCount = 3;

inline std::string_view tier_name(Tier tier) {
  switch (tier) {
    case Tier::L0: return "l0";
    case Tier::L1: return "l1";
    case Tier::L2: return "l2";
  }
  return "unknown";
}

}  // namespace kv
