#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <memory>
#include <sstream>

#include "model/llama_model.h"
#include "model/tokenizer.h"
#include "test_support.h"

using namespace kv;

namespace {

struct Stories {
  std::shared_ptr<const LlamaWeights> weights;
  Tokenizer tokenizer;
  ThreadPool pool{2};
};

Stories& stories() {
  static Stories s{std::make_shared<const LlamaWeights>(load_llama2c(kvtest::model_file("stories260K.bin"))),
                   load_llama2c_tokenizer(kvtest::model_file("tok512.bin"), 512)};
  return s;
}

CacheConfig f32_cache(int page_tokens = 16) {
  CacheConfig c;
  c.geometry = {5, 8, 4, 8, 512};
  c.k_format = Format::F32;
  c.v_format = Format::F32;
  c.page_tokens = page_tokens;
  c.threads = 1;
  return c;
}

std::vector<int> parse_ids(const std::string& text) {
  std::istringstream in(text);
  std::vector<int> ids;
  for (int id; in >> id;) ids.push_back(id);
  return ids;
}

const char* kGreedyIds =
    "403 407 261 378 432 383 286 261 376 298 315 421 395 317 426 338 401 396 267 337 410 408 419 292 411 322 265 282 "
    "295 433 426 385 328 432 358 394 261 370 432 352 266 268 388 426 338 391 266 267 337 335 312 432 398 312 286 267 "
    "414 270 333 415 426 13 438 310 439 419 357 336 432 313 438 310 432 278 316 439 419 298 414 267 265 282 295 433 "
    "426 436 317 286 296 418 269 279 292 416 439 413 409 416 327 263 415 294 267 400 426 338 336 432 313 442 391 267 "
    "337 335 364 420 268 388 432 398 359 280 303 439 413 272 417 264 312 426 436 13 438 310 286 296 418 269 279 292 "
    "416 439 413 409 416 327 263 415 294 267 400 426 338 336 432 313 442 439 423 262 304 420 422 432 317 426 359 279 "
    "292 416 439 413 409 416 327 263 415 294 267 400 426 436 13 438 310 279 292 416 439 413 391 267 281 421 427 311 "
    "357 432 384 358";

}  // namespace

TEST_CASE("Test vector 1: 200 greedy tokens from BOS, byte for byte", "[model]") {
  Stories& s = stories();
  LlamaModel model(s.weights, 512, s.pool);
  KVCache cache(f32_cache());
  const std::vector<int> ids = generate_greedy(model, cache, {1}, 200);
  CHECK(ids == parse_ids(kGreedyIds));
  std::ifstream in(kvtest::model_file("stories260K-greedy-n200.txt"), std::ios::binary);
  std::stringstream expected;
  expected << in.rdbuf();
  CHECK(s.tokenizer.decode_all(1, ids) == expected.str());
}

TEST_CASE("Test vector 2: greedy generation from a prompt", "[model]") {
  Stories& s = stories();
  LlamaModel model(s.weights, 512, s.pool);
  KVCache cache(f32_cache());
  const std::vector<int> prompt = s.tokenizer.encode("Once upon a time", true, false);
  const std::vector<int> ids = generate_greedy(model, cache, prompt, 64);
  const std::vector<int> all = parse_ids(kGreedyIds);
  CHECK(ids == std::vector<int>(all.begin(), all.begin() + 64));
  CHECK(s.tokenizer.decode_all(1, ids) ==
        "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she "
        "saw a big, red ball. She wanted to play with it, but it was too high.\nLily");
}

TEST_CASE("Test vector 3: logits at positions 0-4", "[model]") {
  Stories& s = stories();
  struct Expect { int top; float logit; float lse; };
  const Expect expect[] = {{403, 17.02352f, 17.267259f}, {407, 18.45998f, 18.477497f}, {261, 17.13697f, 17.149076f},
                           {378, 18.87439f, 18.875112f}, {432, 17.79940f, 17.831101f}};
  const std::vector<int> input = {1, 403, 407, 261, 378};
  for (int chunk : {1, 5}) {  // token by token, and one prefill chunk
    LlamaModel model(s.weights, 512, s.pool);
    KVCache cache(f32_cache());
    const SeqId seq = cache.create_sequence();
    StepBuffers buffers;
    std::vector<float> logits;
    for (int pos = 0; pos < 5; pos += chunk) {
      run_step(model, cache, seq, input.data() + pos, chunk, pos, buffers);
      const auto& l = model.logits();
      logits.insert(logits.end(), l.begin(), l.end());
    }
    for (int pos = 0; pos < 5; ++pos) {
      const float* row = logits.data() + pos * 512;
      const int top = static_cast<int>(std::max_element(row, row + 512) - row);
      double sum = 0.0;
      for (int i = 0; i < 512; ++i) sum += std::exp(static_cast<double>(row[i]) - row[top]);
      CAPTURE(chunk, pos);
      CHECK(top == expect[pos].top);
      CHECK(row[top] == Approx(expect[pos].logit).margin(1e-4));
      CHECK(row[top] + std::log(sum) == Approx(expect[pos].lse).margin(1e-4));
    }
  }
}

TEST_CASE("The paged f32 path agrees with a plain dense forward pass to 1e-5", "[model]") {
  Stories& s = stories();
  const std::vector<int> tokens = s.tokenizer.encode(
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her "
      "friends and her dog Max, who liked to chase the ball.",
      true, false);
  REQUIRE(tokens.size() > 33);  // more than two pages of 16
  const std::vector<float> dense = reference_forward(*s.weights, tokens);
  for (int chunk : {1, 7}) {
    LlamaModel model(s.weights, 512, s.pool);
    KVCache cache(f32_cache());
    const SeqId seq = cache.create_sequence();
    StepBuffers buffers;
    std::vector<float> paged;
    for (int pos = 0; pos < static_cast<int>(tokens.size()); pos += chunk) {
      const int n = std::min(chunk, static_cast<int>(tokens.size()) - pos);
      run_step(model, cache, seq, tokens.data() + pos, n, pos, buffers);
      paged.insert(paged.end(), model.logits().begin(), model.logits().end());
    }
    CAPTURE(chunk);
    CHECK(kvtest::relative_error(paged, dense) < 1e-5f);
  }
}

TEST_CASE("A llama step cannot skip attention", "[model]") {
  Stories& s = stories();
  LlamaModel model(s.weights, 512, s.pool);
  KVCache cache(f32_cache());
  const SeqId seq = cache.create_sequence();
  StepBuffers buffers;
  const int token = 1;
  CHECK_THROWS_WITH(run_step(model, cache, seq, &token, 1, 0, buffers, StepAttention::AppendOnly),
                    Catch::Contains("append-only"));
}
