#include "attention/paged_attention.h"

#include <algorithm>
#include <cmath>

#include "attention/page_prefetch.h"
#include "attention/softmax_state.h"
#include "runtime/error.h"

namespace kv {

namespace {

int context_tokens(const std::vector<PageView>& pages) {
  int tokens = 0;
  for (const PageView& page : pages) tokens += page.tokens;
  return tokens;
}

void scale_queries(const PagedAttentionArgs& args, AttentionWorkspace& ws) {
  const std::size_t count = static_cast<std::size_t>(args.n_queries) * static_cast<std::size_t>(args.shape.q_heads) *
                            static_cast<std::size_t>(args.shape.head_dim);
  ws.q_scaled.resize(count);
  for (std::size_t i = 0; i < count; ++i) ws.q_scaled[i] = args.q[i] * args.shape.scale;
}

void run_decode(const PageKernels& kernels, ThreadPool& pool, const PagedAttentionArgs& args, AttentionWorkspace& ws) {
  const AttentionShape& shape = args.shape;
  const int group = shape.group();
  const int dim = shape.head_dim;
  const std::size_t stride = SoftmaxState::stride(dim);
  const auto& pages = *args.pages;
  const int split = std::max(1, args.split_pages);
  // Heads may attend to different numbers of pages (a selection plan): chunk by the longest,
  // and lay out page_lse head after head.
  std::size_t longest = 0;
  std::vector<std::size_t> lse_offset(pages.size());
  for (std::size_t h = 0, offset = 0; h < pages.size(); ++h) {
    longest = std::max(longest, pages[h].size());
    lse_offset[h] = offset;
    offset += pages[h].size() * static_cast<std::size_t>(group);
  }
  // Chunks of at most `split` page positions, and at least kMinDecodeTasks of them where there
  // are enough positions: a sparse plan's few pages per head would otherwise make a handful of
  // large tasks, and the thread left with the last one keeps the others waiting. Positions
  // are spread evenly over the chunks.
  const int positions = static_cast<int>(longest);
  const int chunks = std::max({1, (positions + split - 1) / split, std::min(positions, kMinDecodeTasks)});
  const std::size_t task_floats = static_cast<std::size_t>(group) * stride;
  ws.states.resize(static_cast<std::size_t>(shape.kv_heads) * chunks * task_floats);

  // One task per chunk of page positions, all kv heads, one head after the other: the pages of
  // head 0 in the chunk, then those of head 1, ... Only one head's states (its q heads) are in
  // use at a time, so they stay in L1 beside the pages in flight; all heads' states together
  // (16 KB for 8 heads of 4) did not. A head's pages sit apart in memory (an append allocates a
  // block's pages head by head, decode one position at a time for every head), which the
  // kernels' software prefetch of the next item covers. With the prefetch spread over both of
  // a page's passes, q4 decode at 32K on two threads took 0.81-0.91x the time of reading
  // position by position (README, Performance). Each (head, chunk) keeps its own state; merging
  // stays in order.
  pool.parallel_for(static_cast<std::size_t>(chunks), [&](std::size_t task) {
    const int chunk = static_cast<int>(task);
    const std::size_t begin = static_cast<std::size_t>(chunk) * longest / chunks;
    const std::size_t end = static_cast<std::size_t>(chunk + 1) * longest / chunks;
    static thread_local std::vector<std::pair<int, std::size_t>> items;  // (head, page) in reading order
    items.clear();
    for (int head = 0; head < shape.kv_heads; ++head) {
      for (std::size_t p = begin; p < end; ++p) {
        if (p < pages[static_cast<std::size_t>(head)].size()) items.emplace_back(head, p);
      }
    }
    for (int head = 0; head < shape.kv_heads; ++head) {
      float* states = ws.states.data() + (static_cast<std::size_t>(head) * chunks + chunk) * task_floats;
      for (int g = 0; g < group; ++g) SoftmaxState(states + g * stride, dim).reset();
    }
    const auto view = [&](std::size_t i) -> const PageView& {
      return pages[static_cast<std::size_t>(items[i].first)][items[i].second];
    };
    // The first item is requested at once; the kernels request the rest as they go.
    if (!items.empty()) PagePrefetch(&view(0), 1).step();
    for (std::size_t i = 0; i < items.size(); ++i) {
      const auto [head, p] = items[i];
      // The kernel requests the next item while it computes this one (PageView::next): 0.984x
      // the time of asking for the item after next at 32K on two threads (222 of 400 calls
      // faster), likely because three pages in flight and the scratch overfill a 32 KiB L1.
      PageView page = view(i);
      page.next = i + 1 < items.size() ? &view(i + 1) : nullptr;
      float* states = ws.states.data() + (static_cast<std::size_t>(head) * chunks + chunk) * task_floats;
      const float* q = ws.q_scaled.data() + static_cast<std::size_t>(head) * group * dim;
      float* lse = args.page_lse == nullptr ? nullptr : args.page_lse + lse_offset[static_cast<std::size_t>(head)] + p * group;
      kernels.decode_page(page, q, group, states, lse);
    }
  });

  // Each kv head merges its chunks in order; heads in parallel.
  pool.parallel_for(static_cast<std::size_t>(shape.kv_heads), [&](std::size_t task) {
    const int head = static_cast<int>(task);
    float* first = ws.states.data() + static_cast<std::size_t>(head) * chunks * task_floats;
    for (int chunk = 1; chunk < chunks; ++chunk) {
      const float* part = first + static_cast<std::size_t>(chunk) * task_floats;
      for (int g = 0; g < group; ++g) {
        SoftmaxState(first + g * stride, dim).merge(SoftmaxState(const_cast<float*>(part) + g * stride, dim));
      }
    }
    if (args.extra_states != nullptr) {
      for (int g = 0; g < group; ++g) {
        const float* extra = args.extra_states + (static_cast<std::size_t>(head) * group + g) * stride;
        SoftmaxState(first + g * stride, dim).merge(SoftmaxState(const_cast<float*>(extra), dim));
      }
    }
    for (int g = 0; g < group; ++g) {
      const SoftmaxState state(first + g * stride, dim);
      state.write_output(args.out + (static_cast<std::size_t>(head) * group + g) * dim);
      if (args.query_lse != nullptr) {
        args.query_lse[head * group + g] = state.empty() ? -INFINITY : state.max() + std::log(state.sum());
      }
    }
  });
}

void run_prefill(const PageKernels& kernels, ThreadPool& pool, const PagedAttentionArgs& args, AttentionWorkspace& ws) {
  const AttentionShape& shape = args.shape;
  const int group = shape.group();
  const int dim = shape.head_dim;
  const std::size_t stride = SoftmaxState::stride(dim);
  const auto& pages = *args.pages;
  const int ctx = args.context_tokens > 0 ? args.context_tokens : context_tokens(pages[0]);
  const int first_query_pos = ctx - args.n_queries;
  const int blocks = (args.n_queries + kPrefillQueryBlock - 1) / kPrefillQueryBlock;

  pool.parallel_for(static_cast<std::size_t>(shape.kv_heads) * blocks, [&](std::size_t task) {
    const int head = static_cast<int>(task) / blocks;
    const int block = static_cast<int>(task) % blocks;
    const int q_begin = block * kPrefillQueryBlock;
    const int q_count = std::min(kPrefillQueryBlock, args.n_queries - q_begin);
    // Per-task buffers: [q_count][group] states, the block's queries and a dequantized page.
    static thread_local std::vector<float> states, queries, scratch;
    states.resize(static_cast<std::size_t>(q_count) * group * stride);
    queries.resize(static_cast<std::size_t>(q_count) * group * dim);
    scratch.resize(2 * static_cast<std::size_t>(kMaxPageTokens) * dim);
    for (int i = 0; i < q_count * group; ++i) SoftmaxState(states.data() + i * stride, dim).reset();
    for (int i = 0; i < q_count; ++i) {
      const float* src = ws.q_scaled.data() + (static_cast<std::size_t>(q_begin + i) * shape.q_heads + head * group) * dim;
      std::copy(src, src + static_cast<std::size_t>(group) * dim, queries.data() + static_cast<std::size_t>(i) * group * dim);
    }
    const int last_query_pos = first_query_pos + q_begin + q_count - 1;
    int token_pos = 0;
    for (const PageView& page : pages[head]) {
      if (page.first_token >= 0) token_pos = page.first_token;  // a page subset (sparse prefill)
      if (token_pos > last_query_pos) break;
      PrefillPageArgs page_args{page, token_pos, queries.data(), q_count, group, first_query_pos + q_begin,
                                states.data(), scratch.data()};
      kernels.prefill_page(page_args);
      token_pos += page.tokens;
    }
    for (int i = 0; i < q_count; ++i) {
      for (int g = 0; g < group; ++g) {
        float* dst = args.out + (static_cast<std::size_t>(q_begin + i) * shape.q_heads + head * group + g) * dim;
        SoftmaxState(states.data() + (static_cast<std::size_t>(i) * group + g) * stride, dim).write_output(dst);
      }
    }
  });
}

}  // namespace

void paged_attention(const PageKernels& kernels, ThreadPool& pool, const PagedAttentionArgs& args,
                     AttentionWorkspace& workspace) {
  KV_ASSERT(args.pages != nullptr && static_cast<int>(args.pages->size()) == args.shape.kv_heads,
            "one page list per kv head");
  KV_ASSERT(args.n_queries >= 1, "at least one query");
  scale_queries(args, workspace);
  if (args.n_queries == 1) {
    run_decode(kernels, pool, args, workspace);
  } else {
    run_prefill(kernels, pool, args, workspace);
  }
}

}  // namespace kv
