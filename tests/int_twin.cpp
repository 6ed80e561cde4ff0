#include "int_twin.h"

#include "attention/int_dot.h"
#include "attention/page_kernels.h"

namespace kvtest {

bool integer_decode(kv::Isa isa, const std::vector<std::vector<kv::PageView>>& views) {
  if (isa == kv::Isa::Scalar) return false;
  for (const auto& head : views) {
    for (const kv::PageView& page : head) {
      const kv::IntDotPaths paths = kv::int_dot_paths(*page.layout, isa);
      if (paths.k || paths.v) return true;
    }
  }
  return false;
}

namespace {
// The path whose integer rules the twin follows (a kernel table holds plain function pointers).
kv::Isa twin_isa = kv::Isa::Scalar;
}  // namespace

const kv::PageKernels& twin_kernels(kv::Isa isa) {
  static const kv::PageKernels twin{kv::Isa::Scalar,
                                    [](const kv::PageView& page, const float* qp, int group, float* states, float* lse) {
                                      kv::decode_page_int_ref(twin_isa, page, qp, group, states, lse);
                                    },
                                    nullptr, nullptr};
  twin_isa = isa;
  return twin;
}

std::vector<float> twin_decode(kv::Isa isa, const kv::AttentionShape& shape, const std::vector<std::vector<kv::PageView>>& views,
                               const float* q) {
  const kv::PageKernels& twin = twin_kernels(isa);
  kv::ThreadPool pool(1);
  kv::AttentionWorkspace workspace;
  std::vector<float> out(static_cast<std::size_t>(shape.q_heads) * static_cast<std::size_t>(shape.head_dim));
  kv::PagedAttentionArgs args;
  args.shape = shape;
  args.pages = &views;
  args.q = q;
  args.n_queries = 1;
  args.out = out.data();
  kv::paged_attention(twin, pool, args, workspace);
  return out;
}

}  // namespace kvtest
