// libFuzzer target: any byte string through the GGUF reader and the llama model loader must
// end in a model or an InputError — never a crash, a sanitizer report or a huge allocation.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/gguf.h"
#include "runtime/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data), reinterpret_cast<const std::byte*>(data) + size);
  try {
    const kv::GgufFile file = kv::parse_gguf(std::move(bytes), "fuzz.gguf");
    kv::GgufModel model = kv::llama_from_gguf(file);
    (void)model.tokenizer.encode("Once upon a time", true, false);
  } catch (const kv::InputError&) {
  }
  return 0;
}
