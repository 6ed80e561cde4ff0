#include "model_loader.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "model/gguf.h"
#include "runtime/error.h"

namespace kvbench {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

LoadedLlama load_llama(const std::string& model_path, const std::string& tokenizer_path) {
  LoadedLlama loaded;
  if (ends_with(model_path, ".gguf")) {
    kv::GgufModel gguf = kv::load_gguf_llama(model_path);
    loaded.tokenizer = std::move(gguf.tokenizer);
    loaded.weights = std::make_shared<const kv::LlamaWeights>(std::move(gguf.weights));
  } else {
    if (tokenizer_path.empty()) throw kv::InputError(model_path, "tokenizer", "required for a llama2.c checkpoint");
    auto weights = std::make_shared<kv::LlamaWeights>(kv::load_llama2c(model_path));
    loaded.tokenizer = kv::load_llama2c_tokenizer(tokenizer_path, weights->config.vocab_size);
    loaded.weights = std::move(weights);
  }
  loaded.tokenizer.check_matches(loaded.weights->config.vocab_size, model_path);
  return loaded;
}

std::string fetched_models_dir() {
  const auto env = [](const char* name) -> std::string {
    const char* value = std::getenv(name);
    return value != nullptr ? value : "";
  };
  if (const std::string dir = env("KVBENCH_FETCHED_MODELS_DIR"); !dir.empty()) return dir;
  if (const std::string cache = env("XDG_CACHE_HOME"); !cache.empty()) return cache + "/kvbench/models";
  const std::string home = env("HOME");
  return (home.empty() ? std::string(".") : home) + "/.cache/kvbench/models";
}

std::string read_text_file(const std::string& path, const std::string& field) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw kv::InputError(path, field, "cannot open file");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace kvbench
