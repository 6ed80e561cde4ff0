#include "attention/compensation.h"

#include <algorithm>
#include <cmath>

#include "attention/softmax_state.h"
#include "quant/fp16.h"

namespace kv {

void gather_dropped_pages(const std::vector<PageView>& pages, const std::vector<int>& kept, const PageLayout& residual_layout,
                          int dim, DroppedPages& out) {
  const auto udim = static_cast<std::size_t>(dim);
  out.dim = dim;
  out.k_means.clear();
  out.v_means.clear();
  out.log_tokens.clear();
  for (std::size_t p = 0, next = 0; p < pages.size(); ++p) {
    if (next < kept.size() && static_cast<std::size_t>(kept[next]) == p) {
      ++next;
      continue;
    }
    const PageView& page = pages[p];
    if (page.tokens == 0) continue;
    const std::size_t at = out.k_means.size();
    out.k_means.resize(at + udim, 0.0f);
    out.v_means.resize(at + udim, 0.0f);
    if (page.means != nullptr) {  // sealed page: the summary's means
      for (std::size_t c = 0; c < udim; ++c) {
        out.k_means[at + c] = f16_to_f32(page.means[c]);
        out.v_means[at + c] = f16_to_f32(page.means[udim + c]);
      }
    } else {  // residual page: average its F32 rows
      const float* k = residual_layout.at<float>(page.data, residual_layout.k_data);
      const float* v = residual_layout.at<float>(page.data, residual_layout.v_data);
      for (int t = 0; t < page.tokens; ++t) {
        for (std::size_t c = 0; c < udim; ++c) {
          out.k_means[at + c] += k[static_cast<std::size_t>(t) * udim + c] / static_cast<float>(page.tokens);
          out.v_means[at + c] += v[static_cast<std::size_t>(t) * udim + c] / static_cast<float>(page.tokens);
        }
      }
    }
    out.log_tokens.push_back(std::log(static_cast<float>(page.tokens)));
  }
}

void compensation_states(const DroppedPages& dropped, const float* q, int group, float scale, float* states) {
  const int dim = dropped.dim;
  const auto udim = static_cast<std::size_t>(dim);
  const std::size_t stride = SoftmaxState::stride(dim), count = dropped.count();
  std::vector<float> logits(count);
  for (int qh = 0; qh < group; ++qh) {
    SoftmaxState state(states + static_cast<std::size_t>(qh) * stride, dim);
    state.reset();
    if (count == 0) continue;
    const float* qv = q + static_cast<std::size_t>(qh) * udim;
    float best = -INFINITY;
    for (std::size_t d = 0; d < count; ++d) {
      float dot = 0.0f;
      for (std::size_t c = 0; c < udim; ++c) dot += qv[c] * dropped.k_means[d * udim + c];
      logits[d] = dot * scale + dropped.log_tokens[d];
      best = std::max(best, logits[d]);
    }
    state.max() = best;
    for (std::size_t d = 0; d < count; ++d) {
      const float w = std::exp(logits[d] - best);
      state.sum() += w;
      for (std::size_t c = 0; c < udim; ++c) state.out()[c] += w * dropped.v_means[d * udim + c];
    }
  }
}

void compensation_states_ref(const DroppedPages& dropped, const float* q, int group, float scale, float* states) {
  const auto udim = static_cast<std::size_t>(dropped.dim);
  const std::size_t stride = SoftmaxState::stride(dropped.dim), count = dropped.count();
  for (int qh = 0; qh < group; ++qh) {
    float* s = states + static_cast<std::size_t>(qh) * stride;
    SoftmaxState(s, dropped.dim).reset();
    if (count == 0) continue;
    const float* qv = q + static_cast<std::size_t>(qh) * udim;
    std::vector<double> logits(count);
    for (std::size_t d = 0; d < count; ++d) {
      double dot = 0.0;
      for (std::size_t c = 0; c < udim; ++c) dot += static_cast<double>(qv[c]) * dropped.k_means[d * udim + c];
      logits[d] = dot * scale + dropped.log_tokens[d];
    }
    const double best = *std::max_element(logits.begin(), logits.end());
    double sum = 0.0;
    std::vector<double> out(udim, 0.0);
    for (std::size_t d = 0; d < count; ++d) {
      const double w = std::exp(logits[d] - best);
      sum += w;
      for (std::size_t c = 0; c < udim; ++c) out[c] += w * dropped.v_means[d * udim + c];
    }
    s[0] = static_cast<float>(best);
    s[1] = static_cast<float>(sum);
    for (std::size_t c = 0; c < udim; ++c) s[2 + c] = static_cast<float>(out[c]);
  }
}

}  // namespace kv
