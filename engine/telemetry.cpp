#include "telemetry.h"

namespace kv {

OpCounts& OpCounts::operator+=(const OpCounts& other) {
  for (int t = 0; t < kTierCount; ++t) {
    for (int f = 0; f < kFormatCount; ++f) {
      bytes_read[t][f] += other.bytes_read[t][f];
      bytes_written[t][f] += other.bytes_written[t][f];
    }
  }
  for (int f = 0; f < kFormatCount; ++f) macs[f] += other.macs[f];
  softmax_exps += other.softmax_exps;
  return *this;
}

}  // namespace kv
