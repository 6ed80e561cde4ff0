#include "geometry.h"

#include <string>

#include "runtime/error.h"

namespace kv {

void validate_geometry(const ModelGeometry& g, std::string_view where_view) {
  const std::string where(where_view);
  auto positive = [&](int value, const char* field) {
    if (value <= 0) throw InputError(where, field, std::to_string(value) + " must be > 0");
  };
  positive(g.layers, "layers");
  positive(g.q_heads, "q_heads");
  positive(g.kv_heads, "kv_heads");
  positive(g.head_dim, "head_dim");
  positive(g.max_seq, "max_seq");
  if (g.q_heads % g.kv_heads != 0) {
    throw InputError(where, "kv_heads",
                     "q_heads " + std::to_string(g.q_heads) + " is not a multiple of kv_heads " + std::to_string(g.kv_heads));
  }
  if (g.head_dim % 8 != 0 || g.head_dim > 512) {
    throw InputError(where, "head_dim", std::to_string(g.head_dim) + " must be a multiple of 8 up to 512");
  }
}

}  // namespace kv
