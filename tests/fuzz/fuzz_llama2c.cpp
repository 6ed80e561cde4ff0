// libFuzzer target: llama2.c checkpoints and tokenizer files. Either parse or an InputError.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/llama_weights.h"
#include "model/tokenizer.h"
#include "runtime/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data),
                                     reinterpret_cast<const std::byte*>(data) + size);
  try {
    (void)kv::parse_llama2c(bytes, "fuzz.bin");
  } catch (const kv::InputError&) {
  }
  try {
    const kv::Tokenizer tokenizer = kv::parse_llama2c_tokenizer(bytes, "fuzz-tokenizer.bin", 512);
    (void)tokenizer.encode("Once upon a time", true, true);
  } catch (const kv::InputError&) {
  }
  return 0;
}
