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
  for (int f = 0; f < kFormatCount; ++f) quantized_values[f] += other.quantized_values[f];
  bound_products += other.bound_products;
  attention_calls += other.attention_calls;
  attention_queries += other.attention_queries;
  context_pages += other.context_pages;
  managed_pages += other.managed_pages;
  demand_pages += other.demand_pages;
  demand_bytes += other.demand_bytes;
  prefetch_pages += other.prefetch_pages;
  prefetch_bytes += other.prefetch_bytes;
  demand_buffered += other.demand_buffered;
  prefetch_buffered += other.prefetch_buffered;
  selections += other.selections;
  demoted_pages += other.demoted_pages;
  return *this;
}

}  // namespace kv
