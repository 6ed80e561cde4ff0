// Decode through the integer twin of the SIMD kernels (engine/attention/int_dot.h), for tests
// that check attention plumbing against a reference on q4 pages.
#pragma once

#include <vector>

#include "attention/page_kernels.h"
#include "attention/paged_attention.h"
#include "runtime/isa.h"

namespace kvtest {

// True when decode (one query) over these pages with `isa` takes an integer dot product on
// some page.
bool integer_decode(kv::Isa isa, const std::vector<std::vector<kv::PageView>>& views);

// A decode kernel table whose decode is the integer twin of `isa`'s kernels (one twin at a
// time: the table holds plain function pointers, the path is set by the latest call).
const kv::PageKernels& twin_kernels(kv::Isa isa);

// Decode attention of one query over per-kv-head page lists with the twin of `isa`'s kernels.
std::vector<float> twin_decode(kv::Isa isa, const kv::AttentionShape& shape, const std::vector<std::vector<kv::PageView>>& views,
                               const float* q);

// Relative error allowed against the twin: a weight on a rounding boundary may round the
// other way in the kernel (its exp is a polynomial), which moves one head's channels by a
// fraction of a percent of the output's scale (test_page_kernels.cpp bounds it per page).
inline constexpr float kTwinTolerance = 5e-3f;

}  // namespace kvtest
