// Attention over paged KV: splits the work into tasks, runs the page kernels on the thread
// pool and merges partial softmax states in logical page order. The split depends only on
// the shape and `split_pages`, never on the thread count, so results are bit-identical for
// any number of threads.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "attention/attention_ref.h"
#include "attention/page_kernels.h"
#include "runtime/thread_pool.h"

namespace kv {

// 32: each task starts with pages nobody requested ahead and ends in a merge per head, so
// fewer, longer tasks pay that less often; 32 was the fastest of 4, 8, 16 and 32 on q4 decode
// at 4K and 32K (bench_decode.cpp's BM_DecodeAttention).
inline constexpr int kDefaultSplitPages = 32;
inline constexpr int kMinDecodeTasks = 16;  // decode splits into at least this many tasks (or one per page position)
inline constexpr int kPrefillQueryBlock = 64;
// Up to this many queries run as one multi-query decode (speculative verification: every page
// read once for all of them); more run the blocked prefill.
inline constexpr int kMaxVerifyQueries = 16;

// How many times a call of n queries reads each page: once for a decode or a verification (the
// one or two pages of the causal diagonal are read once per query, not counted), once per query
// block for a prefill.
inline int page_passes(int n_queries) {
  return n_queries <= kMaxVerifyQueries ? 1 : (n_queries + kPrefillQueryBlock - 1) / kPrefillQueryBlock;
}

// Pages made resident in waves of page positions (position p: page p of every kv head), so that
// one call never holds more than a bounded share of the pages it reads - a memory tier's cap.
// Results are bit-identical to one wave: every partial softmax state still takes its pages in
// order, and the states merge as they would.
struct PageWaves {
  std::size_t max_bytes = 0;                                 // per wave; one position always goes
  std::function<std::size_t(std::size_t position)> bytes;    // what holding one position costs
  std::function<void(std::size_t begin, std::size_t end)> acquire;  // positions [begin, end); sets the views' data
  std::function<void()> release;
};

struct PagedAttentionArgs {
  AttentionShape shape;
  // pages[h]: kv head h's pages in logical order; every head holds the same token count.
  const std::vector<std::vector<PageView>>* pages = nullptr;
  const float* q = nullptr;  // [n_queries][q_heads][head_dim], for the last n_queries positions
  int n_queries = 1;
  float* out = nullptr;  // like q
  int split_pages = kDefaultSplitPages;  // decode: pages per task
  int context_tokens = 0;  // tokens stored (0: the sum over head 0's pages, when no page is skipped)
  // Decode only, optional: per-page log-sum-exp, head after head ([pages of head h][group]); a
  // page's attention mass is exp(page - final).
  float* page_lse = nullptr;
  // Optional: [n_queries][q_heads] each query's final log-sum-exp (-inf where no token was
  // visible), so that calls over disjoint page sets can be merged.
  float* query_lse = nullptr;
  // Decode only, optional: [q_heads] extra partial softmax states (stride SoftmaxState::stride)
  // merged after the pages, e.g. the compensation for dropped pages.
  const float* compensation_states = nullptr;
  // Optional: read the pages in waves (nullptr: every page is resident for the whole call).
  const PageWaves* waves = nullptr;
  // Test only (CacheConfig::test_repeat_attention): the page kernels run again, into scratch
  // states, for this share of the call's (kv head, page) items, spread evenly over them (item k
  // runs floor((k + 1) * share) - floor(k * share) more times). Outputs are unchanged.
  double repeat_share = 0.0;
};

// Buffers reused across calls so that the decode path does not allocate.
struct AttentionWorkspace {
  std::vector<float> q_scaled;
  std::vector<float> states;
  std::vector<float> prefill_states;  // prefill in waves: every query block's states across waves
  std::vector<float> q_packed;        // verification: queries per kv head
  std::vector<std::vector<int>> page_first;  // verification: each page's first position
};

// Up to kMaxVerifyQueries queries run the fused decode kernel (a multi-query decode); more run
// the blocked prefill kernel.
void paged_attention(const PageKernels& kernels, ThreadPool& pool, const PagedAttentionArgs& args,
                     AttentionWorkspace& workspace);

}  // namespace kv
