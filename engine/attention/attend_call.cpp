#include "attention/attend_call.h"

#include <cmath>
#include <limits>
#include <string>

#include "attention/softmax_state.h"
#include "runtime/error.h"

namespace kv {

void AttendCall::run(const PageKernels& kernels, ThreadPool& pool, PageAccess& access, const AttendCallArgs& args) {
  const SelectionPlan* plan = args.plan;
  // The attended pages: a plan's alone, or a subset of all of the sequence's pages (the
  // caller's, or built here when the call needs them all).
  const std::vector<std::vector<PageView>>* all = args.views;
  if (all == nullptr && (plan == nullptr || args.compensate)) {
    all_views_.resize(static_cast<std::size_t>(args.shape.kv_heads));
    const std::size_t pages = access.pages();
    for (std::size_t h = 0; h < all_views_.size(); ++h) {
      all_views_[h].clear();
      all_views_[h].reserve(pages);
      for (std::size_t p = 0; p < pages; ++p) all_views_[h].push_back(access.view(h, p));
    }
    all = &all_views_;
  }
  compensation_states_.clear();
  if (plan != nullptr && args.compensate) {
    if (args.n_queries != 1) throw InputError("KVCache::attend", "compensate", "compensation applies to decode steps");
    compensate_dropped(args, *all);
  }
  if (plan != nullptr) {
    plan_views(access, *plan, all, static_cast<std::size_t>(args.shape.kv_heads));
  } else {
    views_ = *all;
  }
  PagedAttentionArgs call;
  call.shape = args.shape;
  call.pages = &views_;
  call.q = args.q;
  call.n_queries = args.n_queries;
  call.out = args.out;
  call.split_pages = args.split_pages;
  call.context_tokens = args.context_tokens;
  call.compensation_states = compensation_states_.empty() ? nullptr : compensation_states_.data();
  call.repeat_share = args.repeat_share;
  const int group = args.shape.q_heads / args.shape.kv_heads;
  if (args.page_mass != nullptr && args.n_queries != 1) {
    throw InputError("KVCache::attend", "page_mass", "page masses are reported for decode steps");
  }
  if (args.page_mass != nullptr) {
    std::size_t total = 0;
    for (const auto& head : views_) total += head.size();
    page_lse_.assign(total * static_cast<std::size_t>(group), 0.0f);
    query_lse_.assign(static_cast<std::size_t>(args.shape.q_heads), 0.0f);
    call.page_lse = page_lse_.data();
    call.query_lse = query_lse_.data();
  }
  const PageLayout* residual = args.residual_layout;
  try {
    PageWaves waves;
    if (args.wave_bytes > 0 && sealed_bytes(residual, 0, std::numeric_limits<std::size_t>::max()) > args.wave_bytes) {
      waves.max_bytes = args.wave_bytes;
      waves.bytes = [this, residual](std::size_t position) { return sealed_bytes(residual, position, position + 1); };
      waves.acquire = [this, &access](std::size_t begin, std::size_t end) { access.acquire(views_, begin, end); };
      waves.release = [&access] { access.release(); };
      call.waves = &waves;
    } else {
      access.acquire(views_, 0, std::numeric_limits<std::size_t>::max());
    }
    if (args.through_l0) {
      l0_.attend(kernels, pool, call, workspace_);
    } else {
      paged_attention(kernels, pool, call, workspace_);
    }
  } catch (...) {
    access.release();  // the call's pages are not held past a failed call
    throw;
  }
  if (args.page_mass != nullptr) page_masses(pool, group, *args.page_mass);
}

void AttendCall::page_masses(ThreadPool& pool, int group, std::vector<std::vector<float>>& masses) {
  // One exp per page and q head: kv heads in parallel.
  masses.resize(views_.size());
  mass_offset_.resize(views_.size());
  for (std::size_t h = 0, offset = 0; h < views_.size(); ++h) {
    mass_offset_[h] = offset;
    offset += views_[h].size() * static_cast<std::size_t>(group);
  }
  pool.parallel_for(views_.size(), [&](std::size_t h) {
    auto& head = masses[h];
    head.assign(views_[h].size(), 0.0f);
    const float* lse = page_lse_.data() + mass_offset_[h];
    const float* query = query_lse_.data() + h * static_cast<std::size_t>(group);
    for (std::size_t p = 0; p < views_[h].size(); ++p, lse += group) {
      for (int q_in_group = 0; q_in_group < group; ++q_in_group) head[p] += std::exp(lse[q_in_group] - query[q_in_group]);
    }
  });
}

std::size_t AttendCall::sealed_bytes(const PageLayout* residual, std::size_t begin, std::size_t end) const {
  std::size_t bytes = 0;
  for (const auto& head : views_) {
    for (std::size_t p = begin; p < end && p < head.size(); ++p) bytes += head[p].layout == residual ? 0 : head[p].layout->bytes;
  }
  return bytes;
}

void AttendCall::plan_views(PageAccess& access, const SelectionPlan& plan, const std::vector<std::vector<PageView>>* all,
                            std::size_t kv_heads) {
  // The planned pages, picked from the caller's views of all pages or viewed on their own.
  const std::size_t pages = access.pages();
  const std::size_t heads = kv_heads;
  if (plan.heads.size() != heads || static_cast<std::size_t>(plan.total_pages) != pages) {
    throw InputError("KVCache::attend", "plan",
                     "planned for " + std::to_string(plan.total_pages) + " pages, the sequence has " + std::to_string(pages));
  }
  views_.resize(heads);
  for (std::size_t h = 0; h < heads; ++h) {
    views_[h].clear();
    for (int p : plan.heads[h].pages) {
      if (p < 0 || static_cast<std::size_t>(p) >= pages) {
        throw InputError("KVCache::attend", "plan", "page " + std::to_string(p) + " is not one of the sequence's " + std::to_string(pages));
      }
      const auto page = static_cast<std::size_t>(p);
      views_[h].push_back(all != nullptr ? (*all)[h][page] : access.view(h, page));
    }
  }
}

void AttendCall::compensate_dropped(const AttendCallArgs& args, const std::vector<std::vector<PageView>>& all) {
  const AttentionShape& shape = args.shape;
  const int group = shape.q_heads / shape.kv_heads;
  const std::size_t stride = SoftmaxState::stride(shape.head_dim);
  compensation_states_.assign(static_cast<std::size_t>(shape.q_heads) * stride, 0.0f);
  for (int h = 0; h < shape.kv_heads; ++h) {
    const auto uh = static_cast<std::size_t>(h);
    gather_dropped_pages(all[uh], args.plan->heads[uh].pages, *args.residual_layout, shape.head_dim, dropped_);
    const std::size_t first = uh * static_cast<std::size_t>(group);
    compensation_states(dropped_, args.q + first * static_cast<std::size_t>(shape.head_dim), group, shape.scale,
                        compensation_states_.data() + first * stride);
  }
}

}  // namespace kv
