#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>

#include "gguf_builder.h"
#include "model/gguf.h"
#include "model/llama_model.h"
#include "runtime/error.h"
#include "test_support.h"

using namespace kv;

namespace {

void write_file(const std::string& path, const std::vector<std::byte>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// A tiny llama (dim 32, 2 heads, 1 kv head, hidden 64, 1 layer) with a byte-fallback vocab.
struct GgufFixture {
  std::uint32_t type = 0;  // tensor type of the matrices
  std::function<void(kvtest::GgufBuilder&)> extra_kv;
  std::string arch = "llama";
  bool with_output = true;
  std::vector<std::byte> build(std::uint32_t version = 3, std::uint64_t alignment = 32) const {
    kvtest::GgufBuilder b;
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
    for (int i = 0; i < 256; ++i) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", i);
      tokens.push_back(name);
    }
    for (const char* p : {"\xE2\x96\x81", "a", "b", "\xE2\x96\x81" "a"}) tokens.push_back(p);
    std::vector<float> scores(tokens.size(), 0.0f);
    scores.back() = 1.0f;
    b.kv_str("general.architecture", arch);
    if (alignment != 32) b.kv_u32("general.alignment", static_cast<std::uint32_t>(alignment));
    b.kv_u32("llama.embedding_length", 32);
    b.kv_u32("llama.feed_forward_length", 64);
    b.kv_u32("llama.block_count", 1);
    b.kv_u32("llama.attention.head_count", 2);
    b.kv_u32("llama.attention.head_count_kv", 1);
    b.kv_u32("llama.context_length", 64);
    b.kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    b.kv_str("tokenizer.ggml.model", "llama");
    b.kv_str_array("tokenizer.ggml.tokens", tokens);
    b.kv_f32_array("tokenizer.ggml.scores", scores);
    if (extra_kv) extra_kv(b);
    const auto vocab = static_cast<std::uint64_t>(tokens.size());
    std::uint32_t seed = 1;
    auto values = [&](std::uint64_t n) { return kvtest::random_values(static_cast<std::size_t>(n), seed++, 0.2f); };
    b.tensor("token_embd.weight", {32, vocab}, 0, values(32 * vocab));
    b.tensor("output_norm.weight", {32}, 0, values(32));
    if (with_output) b.tensor("output.weight", {32, vocab}, type, values(32 * vocab));
    b.tensor("blk.0.attn_norm.weight", {32}, 0, values(32));
    b.tensor("blk.0.attn_q.weight", {32, 32}, type, values(32 * 32));
    b.tensor("blk.0.attn_k.weight", {32, 16}, type, values(32 * 16));
    b.tensor("blk.0.attn_v.weight", {32, 16}, type, values(32 * 16));
    b.tensor("blk.0.attn_output.weight", {32, 32}, type, values(32 * 32));
    b.tensor("blk.0.ffn_norm.weight", {32}, 0, values(32));
    b.tensor("blk.0.ffn_gate.weight", {32, 64}, type, values(32 * 64));
    b.tensor("blk.0.ffn_down.weight", {64, 32}, type, values(64 * 32));
    b.tensor("blk.0.ffn_up.weight", {32, 64}, type, values(32 * 64));
    return b.build(version, alignment);
  }
};

std::vector<float> logits_of(std::shared_ptr<const LlamaWeights> weights, const std::vector<int>& tokens) {
  ThreadPool pool(1);
  LlamaModel model(weights, weights->config.seq_len, pool);
  CacheConfig c;
  c.geometry = model.geometry();
  c.k_format = Format::F32;
  c.v_format = Format::F32;
  c.page_tokens = 16;
  c.threads = 1;
  KVCache cache(c);
  const SeqId seq = cache.create_sequence();
  StepBuffers buffers;
  run_step(model, cache, seq, tokens.data(), static_cast<int>(tokens.size()), 0, buffers);
  return model.logits();
}

}  // namespace

TEST_CASE("stories260K.gguf matches the llama2.c checkpoint", "[model]") {
  const GgufModel gguf = load_gguf_llama(kvtest::model_file("stories260K.gguf"));
  const LlamaConfig& c = gguf.weights.config;
  CHECK(gguf.version == 3);
  CHECK((c.dim == 64 && c.hidden_dim == 172 && c.layers == 5 && c.heads == 8 && c.kv_heads == 4));
  CHECK(c.vocab_size == 512);
  CHECK(c.seq_len == 128);  // the header value; the model was trained at 512
  CHECK(gguf.tokenizer.encode("Once upon a time", true, false) == std::vector<int>{1, 403, 407, 261, 378});
  auto from_bin = std::make_shared<const LlamaWeights>(load_llama2c(kvtest::model_file("stories260K.bin")));
  auto from_gguf = std::make_shared<const LlamaWeights>(gguf.weights);
  CHECK(from_gguf->wq == from_bin->wq);
  CHECK(from_gguf->w2 == from_bin->w2);
  const std::vector<int> input = {1, 403, 407, 261, 378};
  CHECK(logits_of(from_gguf, input) == logits_of(from_bin, input));
}

TEST_CASE("GGUF fixtures load in every supported version, alignment and type", "[model]") {
  const std::string path = kvtest::temp_path("fixture.gguf");
  GgufFixture f32;
  write_file(path, f32.build(3));
  const GgufModel reference = load_gguf_llama(path);
  CHECK(reference.weights.config.kv_heads == 1);
  CHECK(reference.tokenizer.piece(259) == " ");
  CHECK(reference.tokenizer.encode("a", true, false) == std::vector<int>{1, 262});  // " a" merged
  for (std::uint32_t version : {2u, 3u}) {
    for (std::uint64_t alignment : {32u, 64u, 256u}) {
      write_file(path, f32.build(version, alignment));
      CAPTURE(version, alignment);
      CHECK(load_gguf_llama(path).weights.wq == reference.weights.wq);
    }
  }
  // F16 and Q8_0 matrices stay in their format (dense layers dequantize panels); BF16 becomes f32.
  struct TypeCase { std::uint32_t type; float tolerance; DenseFormat kept; };
  for (TypeCase tc : {TypeCase{1, 5e-4f, DenseFormat::F16}, TypeCase{30, 4e-3f, DenseFormat::F32}, TypeCase{8, 6e-3f, DenseFormat::Q8}}) {
    GgufFixture fixture;
    fixture.type = tc.type;
    write_file(path, fixture.build());
    const GgufModel loaded = load_gguf_llama(path);
    CAPTURE(tc.type);
    CHECK(loaded.weights.wq.format() == tc.kept);
    CHECK(loaded.weights.w2.format() == tc.kept);
    CHECK(kvtest::max_abs_diff(loaded.weights.wq.to_f32(), reference.weights.wq.to_f32()) <= tc.tolerance);
    CHECK(kvtest::max_abs_diff(loaded.weights.w2.to_f32(), reference.weights.w2.to_f32()) <= tc.tolerance);
    CHECK(kvtest::max_abs_diff(loaded.weights.wq.to_f32(), reference.weights.wq.to_f32()) > 0.0f);
    // The forward pass over the kept format equals, bit for bit, the one over its values in f32.
    auto kept = std::make_shared<const LlamaWeights>(loaded.weights);
    LlamaWeights widened = loaded.weights;
    for (DenseMatrix* m : {&widened.wq, &widened.wk, &widened.wv, &widened.wo, &widened.w1, &widened.w2, &widened.w3, &widened.wcls}) {
      *m = DenseMatrix::from_f32(m->to_f32(), m->cols());
    }
    const std::vector<int> input = {1, 262, 259, 262};
    CHECK(logits_of(kept, input) == logits_of(std::make_shared<const LlamaWeights>(widened), input));
  }
  GgufFixture shared;
  shared.with_output = false;
  write_file(path, shared.build());
  const GgufModel tied = load_gguf_llama(path);
  CHECK(tied.weights.wcls.to_f32() == tied.weights.token_embedding);
  std::remove(path.c_str());
}

TEST_CASE("Every truncation of a GGUF file is a clear error", "[model]") {
  const std::string path = kvtest::temp_path("cut.gguf");
  const std::vector<std::byte> bytes = GgufFixture{}.build();
  for (std::size_t size = 0; size < bytes.size(); size += (size < 8192 ? 13 : 997)) {
    write_file(path, std::vector<std::byte>(bytes.begin(), bytes.begin() + static_cast<long>(size)));
    CAPTURE(size);
    CHECK_THROWS_AS(load_gguf_llama(path), InputError);
  }
  std::remove(path.c_str());
}

TEST_CASE("Malformed GGUF files name what is wrong", "[model]") {
  const std::string path = kvtest::temp_path("bad.gguf");
  auto expect = [&](std::vector<std::byte> bytes, const std::string& message) {
    write_file(path, bytes);
    CAPTURE(message);
    CHECK_THROWS_WITH(load_gguf_llama(path), Catch::Contains(path) && Catch::Contains(message));
  };
  std::vector<std::byte> good = GgufFixture{}.build();
  auto patched = [&](std::size_t offset, std::uint32_t value) {
    std::vector<std::byte> b = good;
    std::memcpy(b.data() + offset, &value, 4);
    return b;
  };
  expect(patched(0, 0x12345678), "bad magic");
  expect(patched(4, 1), "version 1");
  expect(patched(4, 4), "version 4");
  GgufFixture arch;
  arch.arch = "gpt2";
  expect(arch.build(), "general.architecture");
  GgufFixture tok;
  tok.extra_kv = [](kvtest::GgufBuilder& b) { b.kv_u32("llama.rope.dimension_count", 4); };
  expect(tok.build(), "partial rotary");

  kvtest::GgufBuilder weird;
  weird.kv_str("general.architecture", "llama");
  weird.tensor("token_embd.weight", {32, 8}, 12, {}, 4096);  // Q4_K: unsupported
  expect(weird.build(), "unsupported type 12");
  kvtest::GgufBuilder huge;
  huge.tensor("x", {1ull << 39, 1ull << 39}, 0, {});
  expect(huge.build(), "absurd shape");
  kvtest::GgufBuilder past;
  past.tensor("x", {64}, 0, std::vector<float>(64, 1.0f));
  std::vector<std::byte> short_data = past.build();
  short_data.resize(short_data.size() - 8);
  expect(short_data, "past the end");
  kvtest::GgufBuilder strings;
  strings.kv_str("general.architecture", "llama");
  std::vector<std::byte> long_string = strings.build();
  const std::uint64_t absurd = 1ull << 60;
  std::memcpy(long_string.data() + 24, &absurd, 8);  // the first key's length
  expect(long_string, "runs past the end");
  std::remove(path.c_str());
}
