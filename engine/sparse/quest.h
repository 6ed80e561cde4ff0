// Quest's query-aware page score: an upper bound of q.k over a page's keys from per-channel
// key minima and maxima, sum_c max(q_c * min_c, q_c * max_c). The page stores min/max of the
// keys attention actually reads (dequantized), rounded outward to f16, so the bound is true
// for the F32 query; residual pages keep theirs up to date as tokens arrive.
#pragma once

#include <vector>

#include "attention/page_kernels.h"
#include "quant/page_layout.h"
#include "runtime/thread_pool.h"

namespace kv {

float quest_bound(const PageView& page, const float* q);

// bounds[h][p]: for kv head h's pages, the max of the bound over the group's q heads (the
// group shares one selection). q: [q_heads][head_dim], one decode query per q head.
// The kernels' page_bounds runs it on the fastest path; with a pool, over chunks of pages in
// parallel. From the cache's key bounds (KVCache::key_bounds, no page views needed) or from
// page views (their bounds are gathered first).
std::vector<std::vector<float>> quest_bounds(const std::vector<HeadKeyBounds>& heads, int head_dim, const float* q,
                                             int q_heads, const PageKernels& kernels = page_kernels(Isa::Scalar),
                                             ThreadPool* pool = nullptr);
std::vector<std::vector<float>> quest_bounds(const std::vector<std::vector<PageView>>& pages, const float* q, int q_heads,
                                             const PageKernels& kernels = page_kernels(Isa::Scalar),
                                             ThreadPool* pool = nullptr);

}  // namespace kv
