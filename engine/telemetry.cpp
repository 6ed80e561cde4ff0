#include "telemetry.h"

#include <cmath>

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
  demand_waits += other.demand_waits;
  prefetch_buffered += other.prefetch_buffered;
  selections += other.selections;
  demoted_pages += other.demoted_pages;
  return *this;
}

namespace {

std::uint64_t times(std::uint64_t v, double factor) { return static_cast<std::uint64_t>(std::llround(static_cast<double>(v) * factor)); }

}  // namespace

OpCounts scaled(const OpCounts& c, double factor) {
  if (factor == 1.0) return c;
  OpCounts out;
  for (int t = 0; t < kTierCount; ++t) {
    for (int f = 0; f < kFormatCount; ++f) {
      out.bytes_read[t][f] = times(c.bytes_read[t][f], factor);
      out.bytes_written[t][f] = times(c.bytes_written[t][f], factor);
    }
  }
  for (int f = 0; f < kFormatCount; ++f) {
    out.macs[f] = times(c.macs[f], factor);
    out.quantized_values[f] = times(c.quantized_values[f], factor);
  }
  out.softmax_exps = times(c.softmax_exps, factor);
  out.bound_products = times(c.bound_products, factor);
  out.attention_calls = times(c.attention_calls, factor);
  out.attention_queries = times(c.attention_queries, factor);
  out.context_pages = times(c.context_pages, factor);
  out.managed_pages = times(c.managed_pages, factor);
  out.demand_pages = times(c.demand_pages, factor);
  out.demand_bytes = times(c.demand_bytes, factor);
  out.prefetch_pages = times(c.prefetch_pages, factor);
  out.prefetch_bytes = times(c.prefetch_bytes, factor);
  out.demand_buffered = times(c.demand_buffered, factor);
  out.demand_waits = times(c.demand_waits, factor);
  out.prefetch_buffered = times(c.prefetch_buffered, factor);
  out.selections = times(c.selections, factor);
  out.demoted_pages = times(c.demoted_pages, factor);
  return out;
}

}  // namespace kv
