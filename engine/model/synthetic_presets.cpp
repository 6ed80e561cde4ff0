#include "model/synthetic_presets.h"

#include "runtime/error.h"

namespace kv {

std::uint64_t SyntheticPreset::non_attention_macs_per_token() const {
  const auto hidden = static_cast<std::uint64_t>(hidden_size);
  const auto q_dim = static_cast<std::uint64_t>(q_heads) * static_cast<std::uint64_t>(head_dim);
  const auto kv_dim = static_cast<std::uint64_t>(kv_heads) * static_cast<std::uint64_t>(head_dim);
  const std::uint64_t attention_projections = hidden * q_dim + 2 * hidden * kv_dim + q_dim * hidden;
  const std::uint64_t mlp = 3 * hidden * static_cast<std::uint64_t>(intermediate_size);
  return static_cast<std::uint64_t>(layers) * (attention_projections + mlp) + hidden * static_cast<std::uint64_t>(vocab_size);
}

const std::vector<SyntheticPreset>& synthetic_presets() {
  static const std::vector<SyntheticPreset> presets = {
      {"llama-7b-gqa", "huggingface.co/mistralai/Mistral-7B-v0.1 config.json", 32, 32, 8, 128, 10000.0, 32768, 131072,
       4096, 14336, 32000, false},
      // The same model as a phone deploys it: 4-bit weights, one f16 scale per 128 (as GPTQ/AWQ
      // and ExecuTorch's 4-bit schemes group them).
      {"llama-7b-gqa-int4w", "huggingface.co/mistralai/Mistral-7B-v0.1 config.json, 4-bit weights in groups of 128", 32, 32,
       8, 128, 10000.0, 32768, 131072, 4096, 14336, 32000, false, 4, 128},
      {"qwen-1.5b-gqa", "huggingface.co/Qwen/Qwen2-1.5B config.json", 28, 12, 2, 128, 1000000.0, 32768, 131072, 1536,
       8960, 151936, true},
      {"qwen-0.5b-gqa", "huggingface.co/Qwen/Qwen2-0.5B config.json", 24, 14, 2, 64, 1000000.0, 32768, 131072, 896,
       4864, 151936, true},
  };
  return presets;
}

const SyntheticPreset& find_synthetic_preset(std::string_view name, std::string_view where) {
  std::string known;
  for (const SyntheticPreset& p : synthetic_presets()) {
    if (p.name == name) return p;
    known += (known.empty() ? "" : ", ") + p.name;
  }
  throw InputError(std::string(where), "preset", "unknown preset '" + std::string(name) + "' (known: " + known + ")");
}

}  // namespace kv
