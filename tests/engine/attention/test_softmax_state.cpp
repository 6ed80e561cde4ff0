#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "attention/softmax_state.h"

using namespace kv;

namespace {
// Folds scores/values into a fresh state the direct way.
void fold(SoftmaxState& s, const std::vector<float>& scores, const std::vector<std::vector<float>>& values) {
  float m = -INFINITY;
  for (float x : scores) m = std::fmax(m, x);
  s.reset();
  if (scores.empty()) return;
  s.max() = m;
  for (std::size_t i = 0; i < scores.size(); ++i) {
    const float p = std::exp(scores[i] - m);
    s.sum() += p;
    for (int c = 0; c < s.dim(); ++c) s.out()[c] += p * values[i][static_cast<std::size_t>(c)];
  }
}
}  // namespace

TEST_CASE("Merging two empty states gives an empty state", "[attention]") {
  std::vector<float> a(SoftmaxState::stride(4)), b(SoftmaxState::stride(4));
  SoftmaxState sa(a.data(), 4), sb(b.data(), 4);
  sa.reset();
  sb.reset();
  sa.merge(sb);
  CHECK(sa.empty());
  std::vector<float> out(4, 1.0f);
  sa.write_output(out.data());
  for (float x : out) CHECK(x == 0.0f);
}

TEST_CASE("merge(A, B) equals one pass over A then B", "[attention]") {
  const std::vector<float> scores = {0.5f, 3.0f, -1.0f, 2.0f, 7.0f};
  const std::vector<std::vector<float>> values = {{1, 2}, {3, 4}, {5, 6}, {7, 8}, {-1, 0.5f}};
  std::vector<float> whole(SoftmaxState::stride(2)), left(SoftmaxState::stride(2)), right(SoftmaxState::stride(2));
  SoftmaxState w(whole.data(), 2), l(left.data(), 2), r(right.data(), 2);
  fold(w, scores, values);
  for (std::size_t split = 0; split <= scores.size(); ++split) {
    fold(l, {scores.begin(), scores.begin() + static_cast<long>(split)}, {values.begin(), values.begin() + static_cast<long>(split)});
    fold(r, {scores.begin() + static_cast<long>(split), scores.end()}, {values.begin() + static_cast<long>(split), values.end()});
    l.merge(r);
    std::vector<float> expect(2), got(2);
    w.write_output(expect.data());
    l.write_output(got.data());
    CAPTURE(split);
    CHECK(got[0] == Approx(expect[0]).epsilon(1e-6));
    CHECK(got[1] == Approx(expect[1]).epsilon(1e-6));
  }
}
