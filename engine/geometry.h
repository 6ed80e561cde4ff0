// Model geometry as the KV cache sees it.
#pragma once

#include <string_view>

namespace kv {

struct ModelGeometry {
  int layers = 0;
  int q_heads = 0;
  int kv_heads = 0;  // GQA: q_heads is a multiple of kv_heads
  int head_dim = 0;
  int max_seq = 0;   // tokens a sequence may hold

  int group() const { return kv_heads > 0 ? q_heads / kv_heads : 0; }
};

// Throws InputError naming `where` and the field when the geometry is impossible.
void validate_geometry(const ModelGeometry& geometry, std::string_view where);

}  // namespace kv
