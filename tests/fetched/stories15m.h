// The fetched stories15M files (models/fetch.sh) and what the tests share about them.
#pragma once

#include <memory>
#include <string>

#include "model/llama_weights.h"
#include "model/tokenizer.h"

namespace kvtest {

// The directory models/fetch.sh fills (kvbench's own rule: KVBENCH_FETCHED_MODELS_DIR, else the
// user's cache).
std::string fetched_dir();
// Why the tests cannot run here ("" when both files are present).
std::string stories15m_missing();
std::string stories15m_file(const std::string& name);  // stories15M.bin or tok32000.bin

struct Stories15M {
  std::shared_ptr<const kv::LlamaWeights> weights;
  kv::Tokenizer tokenizer;
};
// Loaded once per process.
const Stories15M& stories15m();

}  // namespace kvtest
