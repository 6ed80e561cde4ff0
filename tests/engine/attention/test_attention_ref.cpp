#include <catch2/catch.hpp>

#include <vector>

#include "attention/attention_ref.h"

using namespace kv;

TEST_CASE("Reference attention: one token returns its value", "[attention]") {
  const AttentionShape shape{2, 1, 8, 0.35f};
  std::vector<float> q(16, 0.3f), k(8, 1.0f), v(8), out(16);
  for (int c = 0; c < 8; ++c) v[c] = static_cast<float>(c);
  attention_ref(shape, q.data(), 1, k.data(), v.data(), 1, out.data());
  for (int h = 0; h < 2; ++h)
    for (int c = 0; c < 8; ++c) CHECK(out[h * 8 + c] == Approx(c));
}

TEST_CASE("Reference attention is causal and uses the right kv head", "[attention]") {
  // 2 kv heads, 4 q heads (group 2), 3 tokens, equal keys: outputs are means of visible V.
  const AttentionShape shape{4, 2, 8, 1.0f};
  const int ctx = 3;
  std::vector<float> k(ctx * 2 * 8, 0.0f), v(ctx * 2 * 8);
  for (int t = 0; t < ctx; ++t)
    for (int h = 0; h < 2; ++h)
      for (int c = 0; c < 8; ++c) v[(t * 2 + h) * 8 + c] = static_cast<float>(10 * h + t);
  std::vector<float> q(3 * 4 * 8, 1.0f), out(q.size());
  attention_ref(shape, q.data(), 3, k.data(), v.data(), ctx, out.data());
  for (int i = 0; i < 3; ++i) {
    for (int h = 0; h < 4; ++h) {
      const float expect = 10.0f * (h / 2) + static_cast<float>(i) / 2.0f;  // mean of t = 0..i
      CHECK(out[(i * 4 + h) * 8] == Approx(expect));
    }
  }
}
