#include "model/span_layout.h"

#include <algorithm>
#include <cmath>

#include "model/synthetic_random.h"
#include "runtime/error.h"

namespace kv {

namespace {

constexpr std::uint64_t kTagSlot = 0x53, kTagRenew = 0x52, kTagSpan = 0x4e, kTagJitter = 0x4a;
constexpr int kCell = 2048;  // positions per placement cell: slots are counted per cell

float unit(std::uint64_t h) { return static_cast<float>(h >> 40) * (1.0f / 16777216.0f); }

int span_length(synth::NormalStream& rng, const SpanPlacement& p) {
  const double len = std::exp(std::log(static_cast<double>(p.median)) + p.sigma * rng.next());
  return std::clamp(static_cast<int>(std::lround(len)), 1, p.max_len);
}

}  // namespace

void layer_sharing(float adjacent, float far, float& persistent, float& renew) {
  KV_ASSERT(far > 0.0f && far < adjacent && adjacent < 1.0f, "layer sharing needs 0 < far < adjacent < 1");
  // shared(d) = c + (1 - c) p^d; p = (a - c) / (1 - c) and g(c) = p^10 - (b - c) / (1 - c) has
  // one root in [0, b): g(0) = a^10 - b may be either sign, g(b-) = p^10 > 0.
  const auto g = [&](double c) { return std::pow((adjacent - c) / (1.0 - c), 10.0) - (far - c) / (1.0 - c); };
  double lo = 0.0, hi = far;
  if (g(lo) >= 0.0) {
    lo = hi = 0.0;  // sharing already falls slower than geometric: no persistent share needed
  }
  for (int i = 0; i < 60 && hi > lo; ++i) {
    const double mid = 0.5 * (lo + hi);
    (g(mid) < 0.0 ? lo : hi) = mid;
  }
  const double c = 0.5 * (lo + hi);
  persistent = static_cast<float>(c);
  renew = static_cast<float>(1.0 - (adjacent - c) / (1.0 - c));
}

SpanLayout::SpanLayout(const SpanPlacement& p, int layer, int kv_head)
    : seed_(p.seed), layer_(layer), kv_head_(kv_head), max_len_(p.max_len), token_jitter_(p.token_jitter) {
  // The mean span length and E[ln r], so that densities hold and log weights centre on 0.
  synth::NormalStream probe(0x5eed);
  double mean_len = 0.0;
  constexpr int kProbe = 4096;
  for (int i = 0; i < kProbe; ++i) mean_len += span_length(probe, p);
  mean_len /= kProbe;
  const double ranks = p.zipf_ranks;
  const double mean_ln_r = ranks > 1.0 ? (ranks * std::log(ranks) - ranks + 1.0) / (ranks - 1.0) : 0.0;
  const int cells = (p.max_seq + kCell - 1) / kCell;
  for (std::size_t cls = 0; cls < p.class_density.size(); ++cls) {
    const double per_cell = p.class_density[cls] * kCell / mean_len;
    for (int cell = 0; cell < cells; ++cell) {
      const std::uint64_t cell_key = synth::hash_of(p.seed, static_cast<std::uint64_t>(kv_head), static_cast<std::uint64_t>(cell),
                                                    cls, kTagSlot);
      const int slots = static_cast<int>(per_cell) + (unit(cell_key) < per_cell - std::floor(per_cell) ? 1 : 0);
      for (int k = 0; k < slots; ++k) {
        const std::uint64_t slot = synth::splitmix(cell_key ^ (static_cast<std::uint64_t>(k + 1) << 32));
        int epoch = 0;
        if (unit(slot) >= p.persistent) {
          for (int l = layer; l > 0; --l) {
            if (unit(synth::hash_of(p.seed, slot, static_cast<std::uint64_t>(l), 0, kTagRenew)) < p.renew) {
              epoch = l;
              break;
            }
          }
        }
        const std::uint64_t id = synth::hash_of(p.seed, slot, static_cast<std::uint64_t>(epoch), 1, kTagSpan);
        synth::NormalStream rng(id);
        Span s;
        s.id = id;
        s.cls = static_cast<int>(cls);
        s.start = std::max(p.sinks, cell * kCell + static_cast<int>(rng.uniform() * kCell));
        s.len = span_length(rng, p);
        const double r = 1.0 + rng.uniform() * (ranks - 1.0);
        s.log_weight = static_cast<float>(-std::log(r) + mean_ln_r);
        if (s.start + s.len > p.max_seq) continue;
        const bool in_image = std::any_of(p.images.begin(), p.images.end(), [&](const ImageRange& image) {
          return s.start < image.end && image.begin < s.start + s.len;
        });
        if (!in_image) spans_.push_back(s);
      }
    }
  }
  std::sort(spans_.begin(), spans_.end(), [](const Span& a, const Span& b) {
    return a.start != b.start ? a.start < b.start : a.id < b.id;
  });
  // Spans do not overlap: a token in two spans of a head's classes would get both boosts.
  std::vector<Span> apart;
  for (const Span& s : spans_) {
    if (apart.empty() || apart.back().start + apart.back().len <= s.start) apart.push_back(s);
  }
  spans_ = std::move(apart);
  prefix_.resize(p.class_density.size());
  std::vector<std::vector<const Span*>> by_end(p.class_density.size());
  for (const Span& s : spans_) by_end[static_cast<std::size_t>(s.cls)].push_back(&s);
  for (std::size_t cls = 0; cls < by_end.size(); ++cls) {
    auto& list = by_end[cls];
    std::sort(list.begin(), list.end(), [](const Span* a, const Span* b) { return a->start + a->len < b->start + b->len; });
    ClassPrefix& prefix = prefix_[cls];
    prefix.totals.push_back({});
    for (const Span* s : list) {
      Total t = prefix.totals.back();
      for (int pos = s->start; pos < s->start + s->len; ++pos) {
        t.tokens += 1.0;
        t.weight += std::exp(static_cast<double>(token_log_weight(*s, pos)));
      }
      prefix.ends.push_back(s->start + s->len);
      prefix.totals.push_back(t);
    }
  }
}

std::vector<SpanLayout::Span>::const_iterator SpanLayout::upper_bound_start(int pos) const {
  return std::upper_bound(spans_.begin(), spans_.end(), pos, [](int value, const Span& s) { return value < s.start; });
}

float SpanLayout::token_log_weight(const Span& span, int pos) const {
  synth::NormalStream jitter(synth::hash_of(seed_, static_cast<std::uint64_t>(layer_), static_cast<std::uint64_t>(kv_head_),
                                            static_cast<std::uint64_t>(pos), kTagJitter));
  return span.log_weight + token_jitter_ * jitter.next();
}

SpanLayout::Total SpanLayout::before(int cls, int end) const {
  const ClassPrefix& prefix = prefix_[static_cast<std::size_t>(cls)];
  const auto n = std::upper_bound(prefix.ends.begin(), prefix.ends.end(), end) - prefix.ends.begin();
  return prefix.totals[static_cast<std::size_t>(n)];
}

}  // namespace kv
