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

// Runs body(begin, end) over [0, positions): once without waves, else wave by wave with the
// wave's pages held.
template <class Body>
void for_each_wave(const PageWaves* waves, std::size_t positions, Body&& body) {
  if (waves == nullptr) {
    body(std::size_t{0}, positions);
    return;
  }
  for (std::size_t begin = 0; begin < positions;) {
    std::size_t end = begin + 1, bytes = waves->bytes(begin);
    while (end < positions && bytes + waves->bytes(end) <= waves->max_bytes) bytes += waves->bytes(end++);
    waves->acquire(begin, end);
    body(begin, end);
    waves->release();
    begin = end;
  }
}

// How many more times item k of a call runs its page kernel (PagedAttentionArgs::repeat_share).
int repeats(double share, std::size_t k) {
  if (share <= 0.0) return 0;
  return static_cast<int>(std::floor(static_cast<double>(k + 1) * share) - std::floor(static_cast<double>(k) * share));
}

// Reset softmax states for the planted repeats to fold into (their values are never read).
float* repeat_states(double share, std::size_t states, int dim) {
  if (share <= 0.0) return nullptr;
  static thread_local std::vector<float> scratch;
  const std::size_t stride = SoftmaxState::stride(dim);
  scratch.resize(states * stride);
  for (std::size_t i = 0; i < states; ++i) SoftmaxState(scratch.data() + i * stride, dim).reset();
  return scratch.data();
}

void scale_queries(const PagedAttentionArgs& args, AttentionWorkspace& ws) {
  const std::size_t count = static_cast<std::size_t>(args.n_queries) * static_cast<std::size_t>(args.shape.q_heads) *
                            static_cast<std::size_t>(args.shape.head_dim);
  ws.q_scaled.resize(count);
  for (std::size_t i = 0; i < count; ++i) ws.q_scaled[i] = args.q[i] * args.shape.scale;
}

// Queries packed per kv head, [head][query][q head of the group], for verification's n > 1
// queries; one query is laid out that way already. Returns the rows the kernels read.
const float* pack_queries(const AttentionShape& shape, int n, AttentionWorkspace& ws) {
  if (n == 1) return ws.q_scaled.data();
  const int group = shape.group();
  const int dim = shape.head_dim;
  ws.q_packed.resize(static_cast<std::size_t>(shape.kv_heads) * n * group * dim);
  for (int head = 0; head < shape.kv_heads; ++head) {
    for (int j = 0; j < n; ++j) {
      const float* src = ws.q_scaled.data() + (static_cast<std::size_t>(j) * shape.q_heads + head * group) * dim;
      std::copy(src, src + static_cast<std::size_t>(group) * dim,
                ws.q_packed.data() + (static_cast<std::size_t>(head) * n + j) * group * dim);
    }
  }
  return ws.q_packed.data();
}

// Verification: each page's first position, per head, so that a page on the causal diagonal is
// folded query by query over the tokens each may see.
void first_positions(const std::vector<std::vector<PageView>>& pages, std::vector<std::vector<int>>& page_first) {
  page_first.resize(pages.size());
  for (std::size_t h = 0; h < pages.size(); ++h) {
    page_first[h].resize(pages[h].size());
    for (std::size_t p = 0, pos = 0; p < pages[h].size(); ++p) {
      if (pages[h][p].first_token >= 0) pos = static_cast<std::size_t>(pages[h][p].first_token);
      page_first[h][p] = static_cast<int>(pos);
      pos += static_cast<std::size_t>(pages[h][p].tokens);
    }
  }
}

// Each kv head merges its chunks' states in order (then the compensation's) and writes its
// queries' outputs; heads in parallel.
void merge_chunks(ThreadPool& pool, const PagedAttentionArgs& args, AttentionWorkspace& ws, int chunks) {
  const AttentionShape& shape = args.shape;
  const int n = args.n_queries;
  const int group = shape.group();
  const int rows = n * group;
  const int dim = shape.head_dim;
  const std::size_t stride = SoftmaxState::stride(dim);
  const std::size_t task_floats = static_cast<std::size_t>(rows) * stride;
  pool.parallel_for(static_cast<std::size_t>(shape.kv_heads), [&](std::size_t task) {
    const int head = static_cast<int>(task);
    float* first = ws.states.data() + static_cast<std::size_t>(head) * chunks * task_floats;
    for (int chunk = 1; chunk < chunks; ++chunk) {
      const float* part = first + static_cast<std::size_t>(chunk) * task_floats;
      for (int r = 0; r < rows; ++r) {
        SoftmaxState(first + r * stride, dim).merge(SoftmaxState(const_cast<float*>(part) + r * stride, dim));
      }
    }
    if (args.compensation_states != nullptr) {
      for (int g = 0; g < group; ++g) {
        const float* extra = args.compensation_states + (static_cast<std::size_t>(head) * group + g) * stride;
        SoftmaxState(first + g * stride, dim).merge(SoftmaxState(const_cast<float*>(extra), dim));
      }
    }
    for (int j = 0; j < n; ++j) {
      for (int g = 0; g < group; ++g) {
        const SoftmaxState state(first + (j * group + g) * stride, dim);
        const std::size_t row = static_cast<std::size_t>(j) * shape.q_heads + head * group + g;
        state.write_output(args.out + row * dim);
        if (args.query_lse != nullptr) args.query_lse[row] = state.empty() ? -INFINITY : state.max() + std::log(state.sum());
      }
    }
  });
}

// Decode, and verification of up to kMaxVerifyQueries queries at the sequence's end: each page
// is read once for all queries and q heads of its kv head. The kernels see the queries' heads
// as one larger group ([query][q head of the group]) where every query sees the whole page;
// a page that some query may not see whole (the causal diagonal at the end) is folded query by
// query over the tokens each may see.
void run_decode(const PageKernels& kernels, ThreadPool& pool, const PagedAttentionArgs& args, AttentionWorkspace& ws) {
  const AttentionShape& shape = args.shape;
  const int n = args.n_queries;
  const int group = shape.group();
  const int rows = n * group;  // per kv head
  const int dim = shape.head_dim;
  const std::size_t stride = SoftmaxState::stride(dim);
  const auto& pages = *args.pages;
  const int split = std::max(1, args.split_pages);
  KV_ASSERT(n == 1 || (args.page_lse == nullptr && args.compensation_states == nullptr),
            "page masses and compensation are a single decode step's");
  const float* q_rows = pack_queries(shape, n, ws);
  // Verification: how many tokens the first query sees.
  const int ctx = args.context_tokens > 0 ? args.context_tokens : context_tokens(pages[0]);
  const int first_query_pos = ctx - n;
  const std::vector<std::vector<int>>& page_first = ws.page_first;
  if (n > 1) first_positions(pages, ws.page_first);
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
  const std::size_t task_floats = static_cast<std::size_t>(rows) * stride;
  ws.states.resize(static_cast<std::size_t>(shape.kv_heads) * chunks * task_floats);

  // One task per chunk of page positions, all kv heads, one head after the other: the pages of
  // head 0 in the chunk, then those of head 1, ... Only one head's states (its q heads) are in
  // use at a time, so they stay in L1 beside the pages in flight; all heads' states together
  // (16 KB for 8 heads of 4) did not. A head's pages sit apart in memory (an append allocates a
  // block's pages head by head, decode one position at a time for every head), which the
  // kernels' software prefetch of the next item covers, spread over both of a page's passes.
  // Each (head, chunk) keeps its own state; merging stays in order.
  const auto reset_chunk = [&](int chunk) {
    for (int head = 0; head < shape.kv_heads; ++head) {
      float* states = ws.states.data() + (static_cast<std::size_t>(head) * chunks + chunk) * task_floats;
      for (int r = 0; r < rows; ++r) SoftmaxState(states + r * stride, dim).reset();
    }
  };
  if (args.waves != nullptr) {
    pool.parallel_for(static_cast<std::size_t>(chunks), [&](std::size_t task) { reset_chunk(static_cast<int>(task)); });
  }
  for_each_wave(args.waves, longest, [&](std::size_t wave_begin, std::size_t wave_end) {
    pool.parallel_for(static_cast<std::size_t>(chunks), [&](std::size_t task) {
      const int chunk = static_cast<int>(task);
      const std::size_t begin = std::max(wave_begin, static_cast<std::size_t>(chunk) * longest / chunks);
      const std::size_t end = std::min(wave_end, static_cast<std::size_t>(chunk + 1) * longest / chunks);
      if (args.waves == nullptr) reset_chunk(chunk);
      if (begin >= end) return;
      static thread_local std::vector<std::pair<int, std::size_t>> items;  // (head, page) in reading order
      items.clear();
      for (int head = 0; head < shape.kv_heads; ++head) {
        for (std::size_t p = begin; p < end; ++p) {
          if (p < pages[static_cast<std::size_t>(head)].size()) items.emplace_back(head, p);
        }
      }
      const auto view = [&](std::size_t i) -> const PageView& {
        return pages[static_cast<std::size_t>(items[i].first)][items[i].second];
      };
      // The first item is requested at once; the kernels request the rest as they go.
      if (!items.empty()) PagePrefetch(&view(0), 1).step();
      float* const planted = repeat_states(args.repeat_share, static_cast<std::size_t>(rows), dim);
      for (std::size_t i = 0; i < items.size(); ++i) {
        const auto [head, p] = items[i];
        // The kernel requests the next item while it computes this one (PageView::next):
        // asking for the item after next was slower, likely because three pages in flight and
        // the scratch overfill a 32 KiB L1.
        PageView page = view(i);
        page.next = i + 1 < items.size() ? &view(i + 1) : nullptr;
        float* states = ws.states.data() + (static_cast<std::size_t>(head) * chunks + chunk) * task_floats;
        const float* q = q_rows + static_cast<std::size_t>(head) * rows * dim;
        float* lse = args.page_lse == nullptr ? nullptr : args.page_lse + lse_offset[static_cast<std::size_t>(head)] + p * group;
        const int first_sees = n == 1 ? page.tokens : first_query_pos - page_first[static_cast<std::size_t>(head)][p] + 1;
        if (first_sees >= page.tokens) {
          kernels.decode_page(page, q, rows, states, lse);
          for (int r = repeats(args.repeat_share, static_cast<std::size_t>(head) * longest + p); r > 0; --r) {
            kernels.decode_page(page, q, rows, planted, nullptr);
          }
          continue;
        }
        for (int j = 0; j < n; ++j) {
          PageView part = page;
          part.tokens = std::min(page.tokens, first_sees + j);
          if (part.tokens <= 0) continue;
          kernels.decode_page(part, q + static_cast<std::size_t>(j) * group * dim, group, states + j * group * stride, nullptr);
        }
      }
    });
  });

  merge_chunks(pool, args, ws, chunks);
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
  std::size_t longest = 0;
  for (const auto& head : pages) longest = std::max(longest, head.size());

  // One task per (kv head, block of queries). Without waves a task's states live in its thread
  // for the whole call; with waves they persist in the workspace between waves.
  const std::size_t task_floats = static_cast<std::size_t>(kPrefillQueryBlock) * group * stride;
  if (args.waves != nullptr) ws.prefill_states.resize(static_cast<std::size_t>(shape.kv_heads) * blocks * task_floats);
  const auto run_task = [&](std::size_t task, std::size_t page_begin, std::size_t page_end, bool first, bool last) {
    const int head = static_cast<int>(task) / blocks;
    const int block = static_cast<int>(task) % blocks;
    const int q_begin = block * kPrefillQueryBlock;
    const int q_count = std::min(kPrefillQueryBlock, args.n_queries - q_begin);
    // Per-task buffers: [q_count][group] states, the block's queries and a dequantized page.
    static thread_local std::vector<float> own_states, queries, scratch;
    float* states = nullptr;
    if (args.waves == nullptr) {
      own_states.resize(static_cast<std::size_t>(q_count) * group * stride);
      states = own_states.data();
    } else {
      states = ws.prefill_states.data() + task * task_floats;
    }
    queries.resize(static_cast<std::size_t>(q_count) * group * dim);
    scratch.resize(prefill_scratch_floats(dim));
    if (first) {
      for (int i = 0; i < q_count * group; ++i) SoftmaxState(states + i * stride, dim).reset();
    }
    float* const planted = repeat_states(args.repeat_share, static_cast<std::size_t>(q_count) * group, dim);
    for (int i = 0; i < q_count; ++i) {
      const float* src = ws.q_scaled.data() + (static_cast<std::size_t>(q_begin + i) * shape.q_heads + head * group) * dim;
      std::copy(src, src + static_cast<std::size_t>(group) * dim, queries.data() + static_cast<std::size_t>(i) * group * dim);
    }
    const int last_query_pos = first_query_pos + q_begin + q_count - 1;
    const auto& head_pages = pages[static_cast<std::size_t>(head)];
    int token_pos = 0;
    for (std::size_t p = 0; p < page_end && p < head_pages.size(); ++p) {
      const PageView& page = head_pages[p];
      if (page.first_token >= 0) token_pos = page.first_token;  // a page subset (sparse prefill)
      if (token_pos > last_query_pos) break;
      if (p >= page_begin) {
        PrefillPageArgs page_args{page, token_pos, queries.data(), q_count, group, first_query_pos + q_begin, states,
                                  scratch.data()};
        kernels.prefill_page(page_args);
        for (int r = repeats(args.repeat_share, task * longest + p); r > 0; --r) {
          PrefillPageArgs again = page_args;
          again.states = planted;
          kernels.prefill_page(again);
        }
      }
      token_pos += page.tokens;
    }
    if (!last) return;
    for (int i = 0; i < q_count; ++i) {
      for (int g = 0; g < group; ++g) {
        const std::size_t row = static_cast<std::size_t>(q_begin + i) * shape.q_heads + head * group + g;
        const SoftmaxState state(states + (static_cast<std::size_t>(i) * group + g) * stride, dim);
        state.write_output(args.out + row * dim);
        if (args.query_lse != nullptr) args.query_lse[row] = state.empty() ? -INFINITY : state.max() + std::log(state.sum());
      }
    }
  };
  const std::size_t tasks = static_cast<std::size_t>(shape.kv_heads) * blocks;
  if (args.waves == nullptr) {
    pool.parallel_for(tasks, [&](std::size_t task) { run_task(task, 0, longest, true, true); });
    return;
  }
  KV_ASSERT(pages.empty() || pages[0].empty() || pages[0][0].first_token >= 0, "prefill in waves needs each page's first token");
  bool first = true;
  for_each_wave(args.waves, longest, [&](std::size_t begin, std::size_t end) {
    pool.parallel_for(tasks, [&](std::size_t task) { run_task(task, begin, end, first, false); });
    first = false;
  });
  pool.parallel_for(tasks, [&](std::size_t task) { run_task(task, longest, longest, first, true); });
}

}  // namespace

void paged_attention(const PageKernels& kernels, ThreadPool& pool, const PagedAttentionArgs& args,
                     AttentionWorkspace& workspace) {
  KV_ASSERT(args.pages != nullptr && static_cast<int>(args.pages->size()) == args.shape.kv_heads,
            "one page list per kv head");
  KV_ASSERT(args.n_queries >= 1, "at least one query");
  scale_queries(args, workspace);
  if (args.n_queries <= kMaxVerifyQueries) {
    run_decode(kernels, pool, args, workspace);
  } else {
    run_prefill(kernels, pool, args, workspace);
  }
}

}  // namespace kv
