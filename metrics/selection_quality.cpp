#include "selection_quality.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <vector>

namespace kvbench {

std::optional<kv::SelectionQuality> QualityMonitor::check(kv::KVCache& cache, const kv::SparseDecoder& decoder, const float* q,
                                                          const float* out) {
  const std::optional<kv::SparseDecoder::DecodeStep> step = decoder.last_decode_step();
  if (!step || step->step % sample_every_ != 0) return std::nullopt;
  const std::pair<int, int> key{step->step, step->layer};
  if (checked_ == key) return std::nullopt;  // one check per decode step and layer
  checked_ = key;
  const kv::SelectionQuality quality = measure(cache, decoder.last_plan(), step->step, step->layer, step->context, q, out);
  if (sink_ != nullptr) sink_->on_selection_quality(quality);
  return quality;
}

kv::SelectionQuality QualityMonitor::measure(kv::KVCache& cache, const kv::SelectionPlan& plan, int step, int layer, int context,
                                             const float* q, const float* out) const {
  const kv::ModelGeometry& g = cache.config().geometry;
  const int dim = g.head_dim, group = g.group(), page_tokens = cache.config().page_tokens;
  const auto row = static_cast<std::size_t>(dim);
  const double scale = cache.config().softmax_scale;
  kv::SelectionQuality quality;
  quality.step = step;
  quality.layer = layer;
  const std::vector<std::vector<int>> needles = exact_.asked_needles();
  // The visual tokens in the context, and the image each page with any belongs to (the first).
  std::vector<bool> image_token(static_cast<std::size_t>(context), false);
  std::vector<int> image_of_page(static_cast<std::size_t>((context + page_tokens - 1) / page_tokens), -1);
  int image_tokens = 0, images = 0;
  for (const kv::ExactKV::TokenRange& image : exact_.image_tokens()) {
    for (int t = std::max(image.begin, 0); t < std::min(image.end, context); ++t) {
      image_token[static_cast<std::size_t>(t)] = true;
      int& owner = image_of_page[static_cast<std::size_t>(t / page_tokens)];
      if (owner < 0) owner = images;
      ++image_tokens;
    }
    ++images;
  }
  // Each kv head is checked on its own (in parallel); drops are reported afterwards, in order.
  struct HeadCheck {
    double recall = 0.0, oracle = 0.0, missed = 0.0, oracle_missed = 0.0, rel_error = 0.0, cosine = 0.0;
    int criticals = 0;
    std::vector<bool> needle_kept;
    std::vector<int> critical_tokens;  // every q head's exact top-m, for the oracle's misses
    std::vector<kv::TokenDropped> drops;
    double image_mass = 0.0, image_held = 0.0, image_oracle = 0.0;  // summed over q heads
    int image_tokens_kept = 0;
  };
  std::vector<HeadCheck> checks(static_cast<std::size_t>(g.kv_heads));
  cache.pool().parallel_for(static_cast<std::size_t>(g.kv_heads), [&](std::size_t head) {
    const int h = static_cast<int>(head);
    HeadCheck& check = checks[head];
    std::vector<float> keys(static_cast<std::size_t>(context) * row), values(keys.size());
    std::vector<double> weights(static_cast<std::size_t>(context));
    std::vector<bool> kept(static_cast<std::size_t>(context), false);
    for (int p : plan.heads[head].pages) {
      for (int t = p * page_tokens; t < std::min(context, (p + 1) * page_tokens); ++t) kept[static_cast<std::size_t>(t)] = true;
    }
    // A needle is kept when every kv head that answers questions keeps all of its tokens.
    const bool answers = exact_.answers_questions(layer, h);
    for (const std::vector<int>& needle : needles) {
      bool all = true;
      for (int t : needle) all = all && (!answers || t >= context || kept[static_cast<std::size_t>(t)]);
      check.needle_kept.push_back(all);
    }
    for (int t = 0; t < context; ++t) {
      exact_.exact_key(layer, h, t, keys.data() + static_cast<std::size_t>(t) * row);
      exact_.exact_value(layer, h, t, values.data() + static_cast<std::size_t>(t) * row);
    }
    std::vector<double> exact_out(row);
    std::vector<int> order(static_cast<std::size_t>(context));
    // Exact mass per page, summed over the head's q heads: the best pages to keep (oracle).
    std::vector<double> page_mass(static_cast<std::size_t>((context + page_tokens - 1) / page_tokens), 0.0);
    std::vector<double> image_page_mass(image_tokens > 0 ? page_mass.size() : 0, 0.0);  // image tokens' mass only
    for (int qh = 0; qh < group; ++qh) {
      const float* qv = q + static_cast<std::size_t>(h * group + qh) * row;
      double best = -INFINITY;
      for (int t = 0; t < context; ++t) {
        const float* key = keys.data() + static_cast<std::size_t>(t) * row;
        double dot = 0.0;
        for (int c = 0; c < dim; ++c) dot += static_cast<double>(qv[c]) * key[c];
        weights[static_cast<std::size_t>(t)] = dot * scale;
        best = std::max(best, weights[static_cast<std::size_t>(t)]);
      }
      double total = 0.0, held = 0.0;
      for (double& w : weights) total += (w = std::exp(w - best));
      for (int t = 0; t < context; ++t) {
        weights[static_cast<std::size_t>(t)] /= total;
        if (kept[static_cast<std::size_t>(t)]) held += weights[static_cast<std::size_t>(t)];
        page_mass[static_cast<std::size_t>(t / page_tokens)] += weights[static_cast<std::size_t>(t)];
      }
      check.recall += held;
      if (image_tokens > 0) {
        for (int t = 0; t < context; ++t) {
          if (!image_token[static_cast<std::size_t>(t)]) continue;
          const double w = weights[static_cast<std::size_t>(t)];
          check.image_mass += w;
          if (kept[static_cast<std::size_t>(t)]) check.image_held += w;
          image_page_mass[static_cast<std::size_t>(t / page_tokens)] += w;
        }
      }
      // The exact output, against what the engine returned for this q head.
      std::fill(exact_out.begin(), exact_out.end(), 0.0);
      for (int t = 0; t < context; ++t) {
        const float* value = values.data() + static_cast<std::size_t>(t) * row;
        const double w = weights[static_cast<std::size_t>(t)];
        for (int c = 0; c < dim; ++c) exact_out[static_cast<std::size_t>(c)] += w * value[c];
      }
      const float* got = out + static_cast<std::size_t>(h * group + qh) * row;
      double diff = 0.0, norm = 0.0, dot = 0.0, got_norm = 0.0;
      for (int c = 0; c < dim; ++c) {
        const double exact = exact_out[static_cast<std::size_t>(c)];
        diff += (got[c] - exact) * (got[c] - exact);
        norm += exact * exact;
        dot += got[c] * exact;
        got_norm += static_cast<double>(got[c]) * got[c];
      }
      check.rel_error += norm > 0.0 ? std::sqrt(diff / norm) : std::sqrt(diff);
      check.cosine += norm > 0.0 && got_norm > 0.0 ? dot / std::sqrt(norm * got_norm) : (diff == 0.0 ? 1.0 : 0.0);
      // The exact top-m tokens; every dropped one is a miss and a drop-log event.
      for (int t = 0; t < context; ++t) order[static_cast<std::size_t>(t)] = t;
      const int m = std::min(top_m_, context);
      std::partial_sort(order.begin(), order.begin() + m, order.end(), [&](int a, int b) {
        return weights[static_cast<std::size_t>(a)] > weights[static_cast<std::size_t>(b)];
      });
      for (int i = 0; i < m; ++i) {
        const int t = order[static_cast<std::size_t>(i)];
        ++check.criticals;
        check.critical_tokens.push_back(t);
        if (kept[static_cast<std::size_t>(t)]) continue;
        check.missed += 1.0;
        check.drops.push_back({step, layer, h * group + qh, t, static_cast<float>(weights[static_cast<std::size_t>(t)])});
      }
    }
    // Summed over q heads, the mass of a page set is the sum of its pages' masses: the best set
    // of n pages is the n heaviest.
    const std::size_t n = std::min(page_mass.size(), plan.heads[head].pages.size());
    std::vector<int> pages(page_mass.size());
    for (std::size_t i = 0; i < pages.size(); ++i) pages[i] = static_cast<int>(i);
    std::partial_sort(pages.begin(), pages.begin() + static_cast<std::ptrdiff_t>(n), pages.end(), [&](int a, int b) {
      return page_mass[static_cast<std::size_t>(a)] > page_mass[static_cast<std::size_t>(b)];
    });
    std::vector<bool> oracle_page(page_mass.size(), false);
    for (std::size_t i = 0; i < n; ++i) {
      check.oracle += page_mass[static_cast<std::size_t>(pages[i])];
      oracle_page[static_cast<std::size_t>(pages[i])] = true;
    }
    // The same critical tokens against the oracle's pages: what a perfect selector of the same
    // size would still drop.
    for (int t : check.critical_tokens) check.oracle_missed += oracle_page[static_cast<std::size_t>(t / page_tokens)] ? 0.0 : 1.0;
    if (image_tokens > 0) {
      // The visual oracle: of each image, as many pages as the selection kept of it, the
      // heaviest by image mass. It rates the choice within each image; how pages are shared
      // between images (and text) is oracle_mass_recall's question.
      std::vector<std::vector<double>> image_masses(static_cast<std::size_t>(images));
      std::vector<std::size_t> kept_of(static_cast<std::size_t>(images), 0);
      for (int p : plan.heads[head].pages) {
        const int owner = image_of_page[static_cast<std::size_t>(p)];
        if (owner >= 0) ++kept_of[static_cast<std::size_t>(owner)];
      }
      for (std::size_t p = 0; p < image_of_page.size(); ++p) {
        if (image_of_page[p] >= 0) image_masses[static_cast<std::size_t>(image_of_page[p])].push_back(image_page_mass[p]);
      }
      for (std::size_t i = 0; i < image_masses.size(); ++i) {
        std::vector<double>& masses = image_masses[i];
        const auto n = static_cast<std::ptrdiff_t>(std::min(kept_of[i], masses.size()));
        std::partial_sort(masses.begin(), masses.begin() + n, masses.end(), std::greater<>());
        check.image_oracle += std::accumulate(masses.begin(), masses.begin() + n, 0.0);
      }
      for (int t = 0; t < context; ++t) check.image_tokens_kept += image_token[static_cast<std::size_t>(t)] && kept[static_cast<std::size_t>(t)] ? 1 : 0;
    }
  });
  double recall = 0.0, oracle = 0.0, missed = 0.0, oracle_missed = 0.0, rel_error = 0.0, cosine = 0.0;
  int criticals = 0;
  double image_mass = 0.0, image_held = 0.0, image_oracle = 0.0, image_dropped = 0.0;
  std::vector<bool> needle_kept(needles.size(), true);
  for (const HeadCheck& check : checks) {
    recall += check.recall;
    oracle += check.oracle;
    missed += check.missed;
    oracle_missed += check.oracle_missed;
    rel_error += check.rel_error;
    cosine += check.cosine;
    criticals += check.criticals;
    image_mass += check.image_mass;
    image_held += check.image_held;
    image_oracle += check.image_oracle;
    if (image_tokens > 0) image_dropped += 1.0 - static_cast<double>(check.image_tokens_kept) / image_tokens;
    for (std::size_t n = 0; n < needles.size(); ++n) needle_kept[n] = needle_kept[n] && check.needle_kept[n];
    if (sink_ != nullptr) {
      for (const kv::TokenDropped& drop : check.drops) sink_->on_token_dropped(drop);
    }
  }
  quality.attn_mass_recall = recall / g.q_heads;
  quality.oracle_mass_recall = oracle / g.q_heads;
  quality.attn_rel_error = rel_error / g.q_heads;
  quality.attn_cosine = cosine / g.q_heads;
  quality.critical_miss_rate = criticals > 0 ? missed / criticals : 0.0;
  quality.oracle_critical_miss_rate = criticals > 0 ? oracle_missed / criticals : 0.0;
  if (image_tokens > 0) {
    quality.has_images = true;
    // No attention on any image token (underflow): nothing of it was lost.
    quality.visual_mass_recall = image_mass > 0.0 ? image_held / image_mass : 1.0;
    quality.visual_oracle_mass_recall = image_mass > 0.0 ? image_oracle / image_mass : 1.0;
    quality.visual_token_drop = image_dropped / g.kv_heads;
  }
  // A layer where no kv head serves a question-answering head is not asked: its needles are
  // not counted (neither kept nor lost).
  bool asked = false;
  for (int h = 0; h < g.kv_heads; ++h) asked = asked || exact_.answers_questions(layer, h);
  for (std::size_t n = 0; n < needles.size() && asked; ++n) {
    if (needles[n].empty() || needles[n].front() >= context) continue;
    ++quality.needles;
    quality.needles_kept += needle_kept[n] ? 1 : 0;
  }
  return quality;
}

}  // namespace kvbench
