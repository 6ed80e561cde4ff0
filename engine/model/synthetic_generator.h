// What a synthetic statistics model provides: post-RoPE keys, values and queries for any
// (layer, head, position), stateless, and what the measurements need to know about its heads.
// Two exist: the published head types (synthetic_published.h, the default) and the uniform
// heads of benchmark definitions 1-3 (synthetic_uniform.h), kept so old results reproduce.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace kv {

enum class HeadType { Uniform, Streaming, Retrieval, Diffuse };

std::string_view head_type_name(HeadType type);

class HeadGenerator {
 public:
  virtual ~HeadGenerator() = default;
  // The rotation frequency of each channel pair (head_dim / 2 of them): the model builds its
  // cos/sin tables from these and hands a position's row to key() and query().
  virtual const std::vector<double>& frequencies() const = 0;
  // layer: the model's layer index. context: the position's token context (a hash of the token
  // ids up to and including it, SyntheticModel::token_context): as in a real model, a key or
  // value depends on the tokens before it, not on the position alone.
  virtual void key(int layer, int kv_head, int pos, std::uint64_t context, const float* cos_pos, const float* sin_pos,
                   float* out) const = 0;
  virtual void value(int layer, int kv_head, int pos, std::uint64_t context, float* out) const = 0;
  // needle: the asked needle's index, -1 for none.
  virtual void query(int layer, int q_head, int pos, int needle, const float* cos_pos, const float* sin_pos,
                     float* out) const = 0;
  virtual HeadType head_type(int layer, int q_head) const = 0;
  // True when `pos` is one of the heavy-hitter tokens q head `q_head` attends to (outside
  // questions): what synth-stats splits heavy from floor mass by.
  virtual bool heavy_for(int layer, int q_head, int pos) const = 0;
  // True when kv head `kv_head` serves a head that answers questions: needle_recall counts a
  // needle as kept only when every such kv head keeps it.
  virtual bool answers_questions(int layer, int kv_head) const = 0;
  // The tokens a needle occupies (a span of text, or a region of an image's patches).
  virtual std::vector<int> needle_tokens(int needle) const = 0;
};

}  // namespace kv
