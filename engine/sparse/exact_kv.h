// The exact F32 K and V a backend can give back for any position (regenerated or kept for the
// purpose - never the dequantized pages): the reference that sparse-attention quality is
// measured against on sampled steps.
#pragma once

#include <vector>

namespace kv {

class ExactKV {
 public:
  virtual ~ExactKV() = default;
  // layer: the cache's layer index.
  virtual void exact_key(int layer, int kv_head, int pos, float* out) const = 0;
  virtual void exact_value(int layer, int kv_head, int pos, float* out) const = 0;
  // The tokens of each planted needle the current queries ask for (for needle_recall); empty
  // when no question is being asked.
  virtual std::vector<std::vector<int>> asked_needles() const { return {}; }
  // Whether kv head `kv_head` of `layer` serves a head that answers questions: a needle counts
  // as kept when every such kv head keeps all of its tokens.
  virtual bool answers_questions(int /*layer*/, int /*kv_head*/) const { return true; }
  // The visual tokens' positions, [begin, end) per image, ascending (for the visual figures);
  // empty for a text-only context.
  struct TokenRange {
    int begin = 0, end = 0;
  };
  virtual std::vector<TokenRange> image_tokens() const { return {}; }
};

}  // namespace kv
