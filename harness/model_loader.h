// Loading a real model for the llama backend: a llama2.c checkpoint with its tokenizer, or a
// GGUF file that carries its own. Shared by `kvbench score` and the runner.
#pragma once

#include <memory>
#include <string>

#include "model/llama_weights.h"
#include "model/tokenizer.h"

namespace kvbench {

struct LoadedLlama {
  std::shared_ptr<const kv::LlamaWeights> weights;
  kv::Tokenizer tokenizer;
};

// Throws kv::InputError naming the file for a missing, truncated or mismatched model.
// tokenizer: required for a .bin checkpoint, ignored for .gguf.
LoadedLlama load_llama(const std::string& model_path, const std::string& tokenizer_path);

// Where models/fetch.sh leaves the models too large for the repository: $KVBENCH_FETCHED_MODELS_DIR,
// else $XDG_CACHE_HOME/kvbench/models, else $HOME/.cache/kvbench/models (outside any clone, so
// clones on one machine share one download).
std::string fetched_models_dir();

// The whole file as text; InputError naming the file and `field` when it cannot be read.
std::string read_text_file(const std::string& path, const std::string& field);

}  // namespace kvbench
