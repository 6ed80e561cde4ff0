#include "attention/l0_staging.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <utility>

#include "attention/softmax_state.h"
#include "runtime/error.h"

namespace kv {

namespace {

std::size_t padded(const PageView& page) { return (page.layout->bytes + kPageAlign - 1) / kPageAlign * kPageAlign; }

}  // namespace

void L0Stager::attend(const PageKernels& kernels, ThreadPool& pool, const PagedAttentionArgs& whole, AttentionWorkspace& workspace) {
  const std::vector<std::vector<PageView>>& views = *whole.pages;
  const std::size_t half = l0_bytes_ / 2;
  const std::size_t columns = views[0].size();
  for (const auto& head : views) {
    if (head.size() != columns) throw InputError("KVCache::attend", "l0_copy", "needs the same page count for every kv head");
  }
  // Batches: runs of columns (page i of every head) that fit in one half.
  std::vector<std::pair<std::size_t, std::size_t>> batches;
  for (std::size_t begin = 0, end = 0, bytes = 0; end <= columns; ++end) {
    std::size_t column = 0;
    if (end < columns) {
      for (const auto& head : views) column += padded(head[end]);
      if (column > half) throw InputError("memory config", "l0_bytes", "half of L0 must hold one page of every kv head");
    }
    if (end == columns || bytes + column > half) {
      if (end > begin) batches.emplace_back(begin, end);
      begin = end;
      bytes = 0;
    }
    bytes += column;
  }
  if (!arena_) {
    // aligned_alloc wants a size that is a multiple of the alignment; l0_bytes need not be one.
    const std::size_t bytes = (l0_bytes_ + kDirectIoAlign - 1) / kDirectIoAlign * kDirectIoAlign;
    void* memory = std::aligned_alloc(kDirectIoAlign, bytes);
    if (memory == nullptr) throw std::bad_alloc();
    arena_.reset(static_cast<std::byte*>(memory));
  }
  std::vector<std::vector<PageView>> staged[2] = {std::vector<std::vector<PageView>>(views.size()),
                                                  std::vector<std::vector<PageView>>(views.size())};
  const auto copy_batch = [&](std::size_t b) {
    auto& batch = staged[b % 2];
    std::byte* dst = arena_.get() + (b % 2) * half;
    for (std::size_t h = 0; h < views.size(); ++h) {
      batch[h].assign(views[h].begin() + static_cast<std::ptrdiff_t>(batches[b].first),
                      views[h].begin() + static_cast<std::ptrdiff_t>(batches[b].second));
      for (PageView& page : batch[h]) {
        std::memcpy(dst, page.data, page.layout->bytes);
        page.data = dst;
        dst += padded(page);
      }
    }
  };
  const AttentionShape& shape = whole.shape;
  const auto dim = static_cast<std::size_t>(shape.head_dim);
  const auto q_heads = static_cast<std::size_t>(shape.q_heads);
  const auto group = q_heads / static_cast<std::size_t>(shape.kv_heads);
  const std::size_t stride = SoftmaxState::stride(shape.head_dim);
  // Per q head: the merged state so far, and one batch's (normalised output, log-sum-exp) as a
  // state of max lse, sum 1 (sum 0: no visible token), out the output.
  std::vector<float> merged(q_heads * stride), batch(q_heads * stride), batch_out(q_heads * dim), batch_lse(q_heads), batch_page_lse;
  for (std::size_t qh = 0; qh < q_heads; ++qh) SoftmaxState(merged.data() + qh * stride, shape.head_dim).reset();
  const auto attend_batch = [&](std::size_t b) {
    const auto [begin, end] = batches[b];
    PagedAttentionArgs args = whole;
    args.pages = &staged[b % 2];
    args.out = batch_out.data();
    args.query_lse = batch_lse.data();
    args.compensation_states = b == 0 ? whole.compensation_states : nullptr;
    if (whole.page_lse != nullptr) {
      batch_page_lse.assign((end - begin) * views.size() * group, 0.0f);
      args.page_lse = batch_page_lse.data();
    }
    paged_attention(kernels, pool, args, workspace);
    if (whole.page_lse != nullptr) {  // back to the whole call's layout: head after head
      for (std::size_t h = 0; h < views.size(); ++h) {
        std::copy_n(batch_page_lse.begin() + static_cast<std::ptrdiff_t>(h * (end - begin) * group), (end - begin) * group,
                    whole.page_lse + (h * columns + begin) * group);
      }
    }
    for (std::size_t qh = 0; qh < q_heads; ++qh) {
      SoftmaxState part(batch.data() + qh * stride, shape.head_dim);
      part.max() = batch_lse[qh];
      part.sum() = batch_lse[qh] == -INFINITY ? 0.0f : 1.0f;
      std::copy_n(batch_out.begin() + static_cast<std::ptrdiff_t>(qh * dim), dim, part.out());
      SoftmaxState(merged.data() + qh * stride, shape.head_dim).merge(part);
    }
  };
  copy_batch(0);
  for (std::size_t b = 0; b < batches.size(); ++b) {
    // The next batch is copied on the pool's background thread while this one is attended.
    if (b + 1 < batches.size()) pool.start_background([&copy_batch, b] { copy_batch(b + 1); });
    try {
      attend_batch(b);
    } catch (...) {
      try {
        pool.wait_background();  // the copy uses this call's buffers
      } catch (...) {
      }
      throw;
    }
    pool.wait_background();
  }
  for (std::size_t qh = 0; qh < q_heads; ++qh) {
    const SoftmaxState state(merged.data() + qh * stride, shape.head_dim);
    for (std::size_t c = 0; c < dim; ++c) whole.out[qh * dim + c] = state.out()[c] / state.sum();
    if (whole.query_lse != nullptr) whole.query_lse[qh] = state.max() + std::log(state.sum());
  }
}

}  // namespace kv
