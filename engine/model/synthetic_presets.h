// Model-shaped geometry presets for the synthetic backend, each from a public config.json.
// configs/models/<name>.json holds the same values with their source; a test keeps them equal.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kv {

struct SyntheticPreset {
  std::string name;
  std::string source;  // the public config this geometry comes from
  int layers = 0;
  int q_heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  double rope_theta = 10000.0;
  int max_seq = 0;       // default context limit
  int max_seq_long = 0;  // allowed for long-context workloads
  // The non-attention part, described per token for a cost model (never executed):
  int hidden_size = 0;
  int intermediate_size = 0;
  int vocab_size = 0;
  bool tied_embeddings = false;
  // How the dense weights are stored: bits per weight and the group one f16 scale covers (0:
  // no scales). A deployment's INT4 weights change what a token reads, not the KV geometry.
  int weight_bits = 16;
  int weight_group = 0;

  // Weights multiplied per token outside attention: q/k/v/o projections, SwiGLU MLP and the
  // classifier, over all layers (embedding lookups are reads, not products).
  std::uint64_t non_attention_macs_per_token() const;
};

const std::vector<SyntheticPreset>& synthetic_presets();
// Throws InputError naming `where` when no preset has this name.
const SyntheticPreset& find_synthetic_preset(std::string_view name, std::string_view where);

}  // namespace kv
