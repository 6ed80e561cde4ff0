// Page quantization (F32 rows -> one page of the layout's formats) and its exact reference
// inverse. K is asymmetric per channel over the page's tokens; V is symmetric per token in
// groups of layout.v_group channels; fp8 uses one scale per page for K and one for V.
//
// Error bounds (tested): for integer formats |x - x^| <= scale/2 of x's channel (K) or token
// group (V) plus float rounding; fp8 keeps 3 mantissa bits (relative error <= 2^-4 above the
// subnormal range, absolute <= scale * 2^-10 below it); f16 keeps 11 significant bits.
#pragma once

#include <cstddef>
#include <vector>

#include "quant/page_layout.h"

namespace kv {

// Statistics of the raw (pre-quantization) values of one page, for online calibration.
struct PageStats {
  std::vector<float> k_min;           // [head_dim]
  std::vector<float> k_max;           // [head_dim]
  std::vector<float> v_group_absmax;  // [v_groups]: max over tokens of the group's absmax
};

// Quantizes `tokens` (<= page_tokens) rows of K and V, each [tokens][head_dim] F32 and
// finite, into `page` (layout.bytes bytes). Writes payloads, scales, Quest min/max and the
// header (checksum left 0: sealing sets it). `stats` may be null.
void quantize_page(const PageLayout& layout, const float* k, const float* v, int tokens, std::byte* page,
                   PageStats* stats);

// The obviously-correct inverse: writes [page.tokens][head_dim] F32 K and V.
void dequantize_page_ref(const PageView& page, float* k, float* v);

// Dequantizes one token of K (or V) into out[head_dim].
void dequantize_k_row_ref(const PageView& page, int token, float* out);
void dequantize_v_row_ref(const PageView& page, int token, float* out);

}  // namespace kv
