// End to end through the real binary: a policy with speculative decoding beside the same policy
// without, their figures in the database and their refusals.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "e2e/e2e_support.h"
#include "test_support.h"

namespace {

using kvtest::Output;
using kvtest::run_kvbench;
using kvtest::sql_value;

const char* const kSpeculativeSuite = R"({"name": "spec-e2e", "repetitions": 1, "warmup": 0,
  "models": [{"name": "syn", "backend": "synthetic", "preset": "qwen-0.5b-gqa", "sample_layers": 1}],
  "workloads": [{"name": "rag-1k", "kind": "rag", "context_tokens": 1024, "gen_tokens": 33}],
  "policies": [{"name": "q4", "k": "q4", "v": "q4", "page_tokens": 64, "residual_tokens": 64},
               {"name": "q4-spec", "k": "q4", "v": "q4", "page_tokens": 64, "residual_tokens": 64,
                "speculative": {"k": 4, "accept_rate": 1.0}}]})";

std::string speculative_figure(const std::string& db, const std::string& c, const std::string& name, const std::string& clock = "exact") {
  return sql_value(db, "SELECT CASE WHEN value IS NULL THEN 'NULL: ' || na_reason ELSE printf('%.17g', value) END FROM metric_values "
                    "WHERE (case_name LIKE '%/" + c + "/%' OR case_name LIKE '" + c + "/%') AND name = '" + name + "' AND clock = '" + clock + "'");
}

}  // namespace

TEST_CASE("kvbench run: a speculative policy records its rounds, the same KV as plain decoding, and its model price", "[e2e][speculative]") {
  const kvtest::TempDir dir("kvbench-e2e-spec");
  const std::string suite = dir.path + "/spec.json", db = dir.path + "/results.sqlite";
  kvtest::write_file(suite, kSpeculativeSuite);
  const Output out = run_kvbench("run --suite " + suite + " --db " + db);
  INFO(out.text);
  REQUIRE(out.status == 0);
  // accept_rate 1: 33 tokens are 6 rounds of k + 1 = 5 and a last round of k = 2 (a round never
  // commits past the decode op): 7 verify steps, every proposal accepted.
  CHECK(speculative_figure(db, "rag-1k/q4-spec", "spec_accept_rate") == "1");
  CHECK(std::stod(speculative_figure(db, "rag-1k/q4-spec", "spec_tokens_per_step")) == Approx(33.0 / 7.0));
  CHECK(std::stod(speculative_figure(db, "rag-1k/q4-spec", "spec_draft_kv_bytes")) > 0.0);
  CHECK(std::stod(speculative_figure(db, "rag-1k/q4-spec", "spec_verify_ms", "host")) > 0.0);
  CHECK(speculative_figure(db, "rag-1k/q4", "spec_accept_rate") == "NULL: the policy has no speculative decoding");
  // The target's cache holds what plain decoding leaves; its peak may hold k + 1 tentative
  // tokens more in the residual, never less.
  CHECK(speculative_figure(db, "rag-1k/q4", "kv_bytes_per_token") == speculative_figure(db, "rag-1k/q4-spec", "kv_bytes_per_token"));
  CHECK(std::stod(speculative_figure(db, "rag-1k/q4-spec", "peak_l1_bytes")) >= std::stod(speculative_figure(db, "rag-1k/q4", "peak_l1_bytes")));
  // The model clock prices the draft's steps: decode costs more per token than without them
  // here (a draft the size of its target), and the host clock times them.
  CHECK(std::stod(speculative_figure(db, "rag-1k/q4-spec", "decode_tps", "model")) < std::stod(speculative_figure(db, "rag-1k/q4", "decode_tps", "model")));
}

TEST_CASE("kvbench run refuses a speculative policy it cannot run, naming the field", "[e2e][speculative]") {
  const kvtest::TempDir dir("kvbench-e2e-spec-bad");
  const std::string suite = dir.path + "/spec.json", db = dir.path + "/results.sqlite";
  std::string text = kSpeculativeSuite;
  text.replace(text.find("\"accept_rate\": 1.0"), 18, "\"accept_rate\": 1.0, \"draft\": \"layers:0\"");
  kvtest::write_file(suite, text);
  const Output out = run_kvbench("run --suite " + suite + " --db " + db);
  CHECK(out.status == 2);
  CHECK(out.text.find("/policies/1/speculative/draft") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(db));
}

TEST_CASE("kvbench run: speculative decoding on a llama model measures its drafts' acceptance, a synthetic case skips layers:N",
          "[e2e][speculative][model]") {
  const kvtest::TempDir dir("kvbench-e2e-spec-llama");
  const std::string suite = dir.path + "/spec.json", db = dir.path + "/results.sqlite";
  kvtest::write_file(suite, R"({"name": "spec-llama", "repetitions": 1, "warmup": 0,
    "models": [{"name": "small", "backend": "llama", "path": "stories260K.bin", "tokenizer": "tok512.bin"},
               {"name": "syn", "backend": "synthetic", "preset": "qwen-0.5b-gqa", "sample_layers": 1}],
    "workloads": [{"name": "gen", "kind": "speculative", "context_tokens": 128, "gen_tokens": 96}],
    "policies": [{"name": "plain", "k": "q8", "v": "q8", "page_tokens": 16, "v_group": 8},
                 {"name": "self", "k": "q8", "v": "q8", "page_tokens": 16, "v_group": 8,
                  "speculative": {"draft": "layers:4", "k": 4}},
                 {"name": "kvdraft", "k": "q8", "v": "q8", "page_tokens": 16, "v_group": 8,
                  "speculative": {"draft": "kv", "k": 4, "draft_k_format": "q2", "draft_v_format": "q2"}}]})");
  const Output out = run_kvbench("run --suite " + suite + " --models-dir " + std::string(KVBENCH_MODELS_DIR) + " --db " + db +
                                 " --heartbeat 0");
  INFO(out.text);
  REQUIRE(out.status == 0);
  for (const char* policy : {"self", "kvdraft"}) {
    INFO(policy);
    const std::string c = std::string("small/gen/") + policy;
    const double accept = std::stod(speculative_figure(db, c, "spec_accept_rate"));
    CHECK(accept > 0.0);
    CHECK(accept <= 1.0);
    CHECK(std::stod(speculative_figure(db, c, "spec_tokens_per_step")) > 1.0);
    CHECK(std::stod(speculative_figure(db, c, "spec_draft_ms", "host")) > 0.0);
    CHECK(std::stod(speculative_figure(db, c, "decode_tps", "model")) > 0.0);
  }
  CHECK(std::stod(speculative_figure(db, "small/gen/self", "spec_draft_kv_bytes")) == 0.0);
  CHECK(std::stod(speculative_figure(db, "small/gen/kvdraft", "spec_draft_kv_bytes")) > 0.0);
  // The synthetic model has no output head to draft with: its layers:4 case is skipped, named.
  CHECK(kvtest::sql_value(db, "SELECT skipped_reason FROM cases WHERE model = 'syn' AND policy = 'self'").find("llama backend") !=
        std::string::npos);
  CHECK(kvtest::sql_value(db, "SELECT status FROM cases WHERE model = 'syn' AND policy = 'kvdraft'") != "skipped");

  // A draft as deep as the model is refused before anything runs.
  const std::string deep = dir.path + "/deep.json";
  std::string text = kvtest::read_file(suite);
  text.replace(text.find("layers:4"), 8, "layers:5");
  kvtest::write_file(deep, text);
  const Output refused = run_kvbench("run --suite " + deep + " --models-dir " + std::string(KVBENCH_MODELS_DIR) + " --db " +
                                     dir.path + "/deep.sqlite");
  CHECK(refused.status == 2);
  CHECK(refused.text.find("/policies/1/speculative/draft: layers:5 needs a model of more layers: 'small' has 5") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.path + "/deep.sqlite"));
}

TEST_CASE("kvbench run: a smaller synthetic preset drafts with its own geometry, copy and price", "[e2e][speculative]") {
  const kvtest::TempDir dir("kvbench-e2e-spec-preset");
  const std::string suite = dir.path + "/spec.json", db = dir.path + "/results.sqlite";
  kvtest::write_file(suite, R"({"name": "spec-preset", "repetitions": 1, "warmup": 0,
    "models": [{"name": "big", "backend": "synthetic", "preset": "qwen-1.5b-gqa", "sample_layers": 2}],
    "workloads": [{"name": "rag-1k", "kind": "rag", "context_tokens": 1024, "gen_tokens": 33}],
    "policies": [{"name": "q4", "k": "q4", "v": "q4", "page_tokens": 64, "residual_tokens": 64},
                 {"name": "self", "k": "q4", "v": "q4", "page_tokens": 64, "residual_tokens": 64,
                  "speculative": {"k": 4, "accept_rate": 1.0}},
                 {"name": "small", "k": "q4", "v": "q4", "page_tokens": 64, "residual_tokens": 64,
                  "speculative": {"draft": "qwen-0.5b-gqa", "k": 4, "accept_rate": 1.0}}]})");
  const Output out = run_kvbench("run --suite " + suite + " --db " + db + " --heartbeat 0");
  INFO(out.text);
  REQUIRE(out.status == 0);
  // The same configured acceptance, so the same rounds.
  CHECK(speculative_figure(db, "rag-1k/small", "spec_accept_rate") == "1");
  CHECK(speculative_figure(db, "rag-1k/small", "spec_tokens_per_step") == speculative_figure(db, "rag-1k/self", "spec_tokens_per_step"));
  // qwen-0.5b's copy (24 layers, 2 kv heads of 64) is smaller than qwen-1.5b's (28 of 128).
  const double small_copy = std::stod(speculative_figure(db, "rag-1k/small", "spec_draft_kv_bytes"));
  const double self_copy = std::stod(speculative_figure(db, "rag-1k/self", "spec_draft_kv_bytes"));
  CHECK(small_copy > 0.0);
  CHECK(small_copy == Approx(self_copy * (24.0 * 64.0) / (28.0 * 128.0)).epsilon(0.1));
  // On the model clock the small draft's steps cost less than the target's own, and its
  // prefill of every prompt costs time to first token.
  CHECK(std::stod(speculative_figure(db, "rag-1k/small", "decode_tps", "model")) > std::stod(speculative_figure(db, "rag-1k/self", "decode_tps", "model")));
  CHECK(std::stod(speculative_figure(db, "rag-1k/small", "ttft_ms", "model")) > std::stod(speculative_figure(db, "rag-1k/q4", "ttft_ms", "model")));
}
