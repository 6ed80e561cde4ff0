#include "cases/kernel_cases.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "attention/paged_attention.h"

namespace kvbench::cases {

kv::CacheConfig layer_config(kv::Format format, int max_seq, int threads, kv::Isa isa) {
  kv::CacheConfig c;
  c.geometry = {1, kLayer.q_heads, kLayer.kv_heads, kLayer.head_dim, max_seq};
  c.k_format = format;
  c.v_format = format;
  c.page_tokens = kLayer.page_tokens;
  c.residual_tokens = 0;
  c.threads = threads;
  c.isa = isa;
  return c;
}

std::vector<float> case_values(std::size_t count, unsigned seed, bool keys) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(count);
  for (std::size_t i = 0; i < count; ++i) {
    values[i] = normal(rng);
    if (keys && i % 16 == 3) values[i] = 8.0f + values[i];
  }
  return values;
}

std::string AttentionCase::name() const {
  const std::string fmt(kv::format_name(format));
  switch (kind) {
    case AttentionKind::Decode: return "BM_DecodeAttention/" + fmt + "/" + std::to_string(ctx);
    case AttentionKind::Verify: return "BM_VerifyAttention/" + fmt + "/" + std::to_string(queries) + "/" + std::to_string(ctx);
    case AttentionKind::Prefill: return "BM_PrefillAttention/" + fmt + "/" + std::to_string(queries) + "/" + std::to_string(ctx);
  }
  return {};
}

std::vector<AttentionCase> micro_attention_cases() {
  std::vector<AttentionCase> out;
  for (int ctx : {4096, 32768}) {
    for (kv::Format f : kv::kAllFormats) out.push_back({AttentionKind::Decode, f, 1, ctx, Residency::Cold});
  }
  for (kv::Format f : {kv::Format::F16, kv::Format::Q8, kv::Format::Q4}) out.push_back({AttentionKind::Prefill, f, 512, 16384, Residency::Cold});
  for (kv::Format f : kv::kAllFormats) {
    for (int k : {4, 8}) out.push_back({AttentionKind::Verify, f, k, 32768, Residency::Cold});
  }
  return out;
}

std::vector<int> calibration_contexts(bool quick) { return quick ? std::vector<int>{512, 1024, 2048} : std::vector<int>{1024, 4096, 16384}; }

std::vector<AttentionCase> calibration_attention_cases(bool quick) {
  // Fewer than two query blocks would run as a multi-query decode (paged_attention.h).
  constexpr int kPrefillQueries = 2 * kv::kPrefillQueryBlock;
  std::vector<AttentionCase> out;
  for (kv::Format f : kv::kAllFormats) {
    for (int ctx : calibration_contexts(quick)) {
      out.push_back({AttentionKind::Decode, f, 1, ctx, Residency::TwoLayers});
      out.push_back({AttentionKind::Prefill, f, kPrefillQueries, ctx, Residency::TwoLayers});
    }
  }
  return out;
}

double attention_error_bound(kv::Format format) {
  // About twice the largest error measured on case data over decode, verification and prefill
  // (tests/bench/test_kernel_cases.cpp shows them with -s). Two-bit codes err by more than the
  // output's own scale: q2 only proposes (speculative drafts) or holds cold pages.
  switch (format) {
    case kv::Format::F32: return 2e-5;
    case kv::Format::F16: return 2.5e-3;
    case kv::Format::FP8: return 0.25;
    case kv::Format::Q8: return 0.02;
    case kv::Format::Q4: return 0.3;
    case kv::Format::Q2: return 2.5;
  }
  return 0.0;
}

double relative_error(const std::vector<float>& got, const std::vector<float>& exact) {
  double scale = 0.0, worst = 0.0;
  for (std::size_t i = 0; i < exact.size() && i < got.size(); ++i) {
    scale = std::max(scale, std::fabs(static_cast<double>(exact[i])));
    worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - exact[i]));
  }
  if (got.size() != exact.size()) return INFINITY;
  return worst / std::max(scale, 1e-30);
}

std::string SealCase::name() const { return "BM_Quantize/" + std::string(kv::format_name(format)) + "/" + std::to_string(tokens); }

std::vector<SealCase> micro_seal_cases() {
  std::vector<SealCase> out;
  for (kv::Format f : kv::kAllFormats) out.push_back({f, 4096});
  return out;
}

std::vector<SealCase> calibration_seal_cases(bool quick) {
  std::vector<SealCase> out;
  for (kv::Format f : kv::kAllFormats) out.push_back({f, quick ? 1024 : 4096});
  return out;
}

std::string DenseCase::name() const {
  const std::string shape = std::string(kv::dense_format_name(format)) + "/" + std::to_string(out_dim) + "/" + std::to_string(in_dim);
  return tokens == 1 ? "BM_DenseGemv/" + shape : "BM_DenseGemm/" + shape + "/" + std::to_string(tokens);
}

std::vector<DenseCase> micro_dense_cases() {
  std::vector<DenseCase> out;
  for (kv::DenseFormat f : kv::kAllDenseFormats) {
    out.push_back({f, 4096, 4096, 512});
    out.push_back({f, 4096, 4096, 1});
  }
  return out;
}

std::vector<DenseCase> calibration_dense_cases(bool quick) {
  const Residency residency = quick ? Residency::TwoLayers : Residency::Cold;
  const int dim = quick ? 2048 : 4096;
  std::vector<DenseCase> out;
  for (kv::DenseFormat f : kv::kAllDenseFormats) {
    out.push_back({f, dim, dim, 1, residency});
    out.push_back({f, dim, dim, 16, residency});
  }
  return out;
}

double dense_error_bound(const DenseCase& c) {
  // A float sum of in_dim products, blocked by the BLAS: two units of rounding of the sum's
  // magnitude (about five times the worst measured at in_dim 4096).
  return c.in_dim > 0 ? 0x1p-22 : 0.0;
}

std::vector<int> selection_contexts(bool quick) { return quick ? std::vector<int>{512, 2048} : std::vector<int>{1024, 8192}; }

}  // namespace kvbench::cases
