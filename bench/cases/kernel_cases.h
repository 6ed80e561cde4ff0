// The kernel cases kvbench measures - shapes, formats, contexts and error bounds - in one
// registry: kvbench-micro registers a benchmark per case, `kvbench calibrate` fits the host
// profile's rates on the same cases through the same benchmark bodies, and the tests run every
// case's kernel against its exact reference within the case's bound (tests/bench).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "kv_cache.h"
#include "model/dense.h"

namespace kvbench::cases {

// One attention layer of a 7B-class GQA model: 32 q heads, 8 kv heads, head_dim 128, pages of 64.
struct LayerShape {
  int q_heads = 32;
  int kv_heads = 8;
  int head_dim = 128;
  int page_tokens = 64;
};
inline constexpr LayerShape kLayer{};

// A cache of that shape in one K/V format, no residual (every token in sealed pages).
kv::CacheConfig layer_config(kv::Format format, int max_seq, int threads = 0, kv::Isa isa = kv::Isa::Auto);

// Case data: normal values; keys with every 16th channel an offset outlier, as real keys have.
std::vector<float> case_values(std::size_t count, unsigned seed, bool keys);

// Where a case's KV is when a timed call starts.
enum class Residency {
  Cold,       // copies cycled until their total exceeds the last-level cache (micro: the kernel's worst case)
  TwoLayers,  // two copies taking turns, as two sampled layers do in a run (calibration: what runs see)
};

enum class AttentionKind { Decode, Verify, Prefill };

// Attention of `queries` queries at the end of `ctx` tokens already in the cache.
struct AttentionCase {
  AttentionKind kind = AttentionKind::Decode;
  kv::Format format = kv::Format::Q4;
  int queries = 1;
  int ctx = 4096;
  Residency residency = Residency::Cold;
  // BM_DecodeAttention/<fmt>/<ctx>, BM_VerifyAttention/<fmt>/<k>/<ctx>, BM_PrefillAttention/<fmt>/<queries>/<ctx>
  std::string name() const;
};

std::vector<AttentionCase> micro_attention_cases();
// Decode (one query) and prefill (two query blocks of the blocked kernel) in every format at
// three contexts, for the fits of calibrate.
std::vector<AttentionCase> calibration_attention_cases(bool quick);
std::vector<int> calibration_contexts(bool quick);

// The largest error an attention case's output may have against exact attention on the
// unquantized values, per K/V format: the format's own rounding on case data (max |got - exact|
// over max |exact|). The tests hold every case to it.
double attention_error_bound(kv::Format format);
double relative_error(const std::vector<float>& got, const std::vector<float>& exact);

// Page sealing: `tokens` tokens of K and V appended into pages of the format.
struct SealCase {
  kv::Format format = kv::Format::Q4;
  int tokens = 4096;
  std::string name() const;  // BM_Quantize/<fmt>/<tokens>
};
std::vector<SealCase> micro_seal_cases();
std::vector<SealCase> calibration_seal_cases(bool quick);

// A dense layer as the llama backend runs it: `tokens` tokens through an out x in weight.
struct DenseCase {
  kv::DenseFormat format = kv::DenseFormat::F32;
  int out_dim = 4096;
  int in_dim = 4096;
  int tokens = 1;
  Residency residency = Residency::Cold;  // one token: weight copies cycled past the caches, or one weight
  std::string name() const;  // BM_DenseGemv/<fmt>/<out>/<in>, BM_DenseGemm/<fmt>/<out>/<in>/<tokens>
};
std::vector<DenseCase> micro_dense_cases();
// One decode token and a 16-token chunk per weight format: the profile's dense rates (quick: one
// weight, left in the cache).
std::vector<DenseCase> calibration_dense_cases(bool quick);
// Error allowed per output against the double-precision product over the same (dequantized)
// weights, as a multiple of sum_j |w_ij x_j|: float rounding of an in_dim-long sum.
double dense_error_bound(const DenseCase& c);

// Contexts of the selection and sparse-decode bookkeeping fits.
std::vector<int> selection_contexts(bool quick);

}  // namespace kvbench::cases
