// A policy's visual block: a multimodal case selects each image's pages apart from the text
// (images start on a fresh page, each keeps its own share), states the image figures, and a
// budget an image cannot meet is refused before anything is written; with formats of its own an
// image's pages take its bytes. A text-only case runs the same with and without the block.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "e2e/e2e_support.h"
#include "quant/page_layout.h"
#include "test_support.h"

using kvtest::Output;
using kvtest::run_kvbench;
using kvtest::sql_value;

namespace {

// Two images of 576 tokens (9 pages of 64 each, once they start on a fresh page), 1024 text
// tokens and two 32-token answers.
std::string visual_suite(const std::string& workload, const std::string& policy_extra) {
  return R"({"name": "mm", "repetitions": 1, "warmup": 0,
    "models": [{"name": "m", "backend": "synthetic", "preset": "qwen-0.5b-gqa", "sample_layers": 1}],
    "workloads": [)" + workload + R"(],
    "policies": [{"name": "q4-hybrid", "k": "q4", "v": "q4", "page_tokens": 64,
                  "sparse": {"selector": "hybrid", "sinks": 4, "window": 64, "budget": 0.10, "sample_every": 4})" +
         policy_extra + R"(}]})";
}
const char* kMultimodal =
    R"({"name": "mm-2i", "kind": "multimodal", "images": 2, "visual_tokens": 576, "context_tokens": 1024, "gen_tokens": 32})";
const char* kRag = R"({"name": "rag-2k", "kind": "rag", "context_tokens": 2048, "gen_tokens": 16})";

// One run's figures of a clock, a line each.
std::string figures(const std::string& db, int run, const std::string& clock) {
  return sql_value(db, "SELECT group_concat(name || '=' || quote(value), char(10)) FROM (SELECT name, value FROM metric_values WHERE run_id = " +
                           std::to_string(run) + " AND clock = '" + clock + "' ORDER BY name, repetition)");
}

double figure(const std::string& db, int run, const std::string& name) {
  return std::stod(sql_value(db, "SELECT printf('%.17g', value) FROM metric_values WHERE run_id = " + std::to_string(run) + " AND name = '" +
                                     name + "'"));
}

}  // namespace

TEST_CASE("a visual block keeps every image's own pages and states the image figures", "[e2e]") {
  const kvtest::TempDir dir("kvbench-e2e-visual");
  const std::string db = dir.path + "/results.sqlite";
  const std::string suite = dir.path + "/mm.json";
  kvtest::write_file(suite, visual_suite(kMultimodal, ""));
  Output out = run_kvbench("run --suite " + suite + " --db " + db);
  INFO(out.text);
  REQUIRE(out.status == 0);
  kvtest::write_file(suite, visual_suite(kMultimodal, R"(, "visual": {"budget": 0.1})"));
  out = run_kvbench("run --suite " + suite + " --db " + db);
  INFO(out.text);
  REQUIRE(out.status == 0);
  CHECK(sql_value(db, "SELECT json_extract(config_json, '$.policies[0].visual.budget') FROM runs WHERE id = 2") == "0.1");
  CHECK(sql_value(db, "SELECT json_extract(config_json, '$.policies[0].visual') IS NULL FROM runs WHERE id = 1") == "1");
  for (int run : {1, 2}) {
    CAPTURE(run);
    const double recall = figure(db, run, "visual_attn_mass_recall"), oracle = figure(db, run, "visual_oracle_mass_recall");
    CHECK(recall > 0.0);
    CHECK(recall <= oracle + 1e-9);
    CHECK(oracle <= 1.0 + 1e-9);
    CHECK(sql_value(db, "SELECT clock FROM metric_values WHERE name = 'visual_token_drop' AND run_id = " + std::to_string(run)) == "exact");
  }
  // The pages of an image: 9 once it starts on a fresh page; 10 where it starts at token 342
  // (pages 5 to 14) and shares its first and last with text.
  CHECK(figure(db, 2, "visual_kv_bytes_per_image") == 9 * 64 * figure(db, 2, "kv_bytes_per_token"));
  CHECK(figure(db, 1, "visual_kv_bytes_per_image") == 10 * 64 * figure(db, 1, "kv_bytes_per_token"));
  // With the block, each image keeps ceil(10% of 9) = 1 page a kv head at every step: 128 of
  // its 1152 image tokens.
  CHECK(figure(db, 2, "visual_token_drop") == Approx(1.0 - 128.0 / 1152.0).margin(1e-12));
  // Without an L1 cap every image page stays resident: 2 images x 9 pages x 2 kv heads x 24
  // layers (one sampled, scaled). Without the block the pool does not know them.
  CHECK(figure(db, 2, "visual_pages_resident") == 2 * 9 * 2 * 24);
  CHECK(sql_value(db, "SELECT clock || ' ' || extrapolated FROM metric_values WHERE name = 'visual_pages_resident' AND run_id = 2") == "exact 1");
  CHECK(sql_value(db, "SELECT na_reason FROM metric_values WHERE name = 'visual_pages_resident' AND run_id = 1") ==
        "the policy has no visual block: image pages are not told apart");

  // Image pages in formats of their own (q4 with one V scale per head): fewer bytes an image
  // than the text's q4 with V groups of 32, the same selection.
  kvtest::write_file(suite, visual_suite(kMultimodal, R"(, "visual": {"budget": 0.1, "k_format": "q4", "v_format": "q4", "v_group": 64})"));
  out = run_kvbench("run --suite " + suite + " --db " + db);
  INFO(out.text);
  REQUIRE(out.status == 0);
  CHECK(sql_value(db, "SELECT json_extract(config_json, '$.policies[0].visual.v_group') FROM runs WHERE id = 3") == "64");
  const kv::PageLayout visual = kv::PageLayout::make({64, 64, kv::Format::Q4, kv::Format::Q4, 64, false});
  const kv::PageLayout text = kv::PageLayout::make({64, 64, kv::Format::Q4, kv::Format::Q4, 32, false});
  REQUIRE(visual.bytes < text.bytes);
  CHECK(figure(db, 3, "visual_kv_bytes_per_image") == 9.0 * static_cast<double>(visual.bytes) * 2 * 24);
  CHECK(figure(db, 2, "visual_kv_bytes_per_image") == 9.0 * static_cast<double>(text.bytes) * 2 * 24);
  CHECK(figure(db, 3, "kv_bytes_per_token") == figure(db, 2, "kv_bytes_per_token"));  // the text's pages
  CHECK(figure(db, 3, "visual_token_drop") == figure(db, 2, "visual_token_drop"));
  CHECK(figure(db, 3, "visual_pages_resident") == 2 * 9 * 2 * 24);

  // In L2 (an L1 cap far above the context): the image pages, and only they, are written there
  // as they seal, and come back as a read cache; the same selection.
  kvtest::write_file(suite, visual_suite(kMultimodal, R"(, "visual": {"budget": 0.1, "k_format": "q4", "v_format": "q4", "v_group": 64, "tier": "l2"},
                  "memory": {"l1_bytes": "1GiB"})"));
  out = run_kvbench("run --suite " + suite + " --db " + db);
  INFO(out.text);
  REQUIRE(out.status == 0);
  CHECK(sql_value(db, "SELECT json_extract(config_json, '$.policies[0].visual.tier') FROM runs WHERE id = 4") == "l2");
  CHECK(figure(db, 4, "swap_out_bytes") == 2 * figure(db, 4, "visual_kv_bytes_per_image"));
  CHECK(figure(db, 4, "swap_in_bytes") > 0.0);
  CHECK(figure(db, 4, "visual_token_drop") == figure(db, 3, "visual_token_drop"));
  CHECK(figure(db, 4, "attn_mass_recall") == figure(db, 3, "attn_mass_recall"));
  // Under a cap that holds the text but not the images (11 MiB with both in L1): L1 stays within
  // it, image pages come back as they are selected, the same selection.
  REQUIRE(figure(db, 3, "peak_l1_bytes") > 10.0 * (1 << 20));
  kvtest::write_file(suite, visual_suite(kMultimodal, R"(, "visual": {"budget": 0.1, "k_format": "q4", "v_format": "q4", "v_group": 64, "tier": "l2"},
                  "memory": {"l1_bytes": "10MiB", "l0_bytes": "1MiB"})"));
  out = run_kvbench("run --suite " + suite + " --db " + db);
  INFO(out.text);
  REQUIRE(out.status == 0);
  CHECK(figure(db, 5, "peak_l1_bytes") <= 10.0 * (1 << 20));
  CHECK(figure(db, 5, "visual_pages_resident") < 2 * 9 * 2 * 24);
  CHECK(figure(db, 5, "attn_mass_recall") == figure(db, 3, "attn_mass_recall"));
}

TEST_CASE("a visual budget an image cannot meet is refused before anything is written", "[e2e]") {
  const kvtest::TempDir dir("kvbench-e2e-visual-refused");
  const std::string db = dir.path + "/results.sqlite";
  const std::string suite = dir.path + "/mm.json";
  struct Case {
    std::string block, field, reason;
  };
  for (const Case& c : {Case{R"({"budget": 0.1, "min_pages_per_image": 2})", "/policies/0/visual/budget",
                             "case m/mm-2i/q4-hybrid/host: 0.1 keeps 1 page(s) of an image, below min_pages_per_image 2 (image 1 has 9 pages)"},
                        Case{R"({"budget": 1, "min_pages_per_image": 10})", "/policies/0/visual/min_pages_per_image",
                             "case m/mm-2i/q4-hybrid/host: 10 is more than an image holds (image 1 has 9 pages)"},
                        Case{R"({"budget": 0.1, "v_group": 48})", "/policies/0/visual/v_group",
                             "case m/mm-2i/q4-hybrid/host: 48 does not divide head_dim 64 of model 'm' (V groups that do: 8, 16, 32, 64)"}}) {
    kvtest::write_file(suite, visual_suite(kMultimodal, R"(, "visual": )" + c.block));
    for (const char* flags : {"", " --check"}) {
      const Output out = run_kvbench("run --suite " + suite + " --db " + db + flags);
      INFO(out.text);
      CHECK(out.status == 2);
      CHECK(out.text.find(suite + ": " + c.field + ": " + c.reason) != std::string::npos);
      CHECK_FALSE(std::filesystem::exists(db));
    }
  }
}

TEST_CASE("a text-only case runs the same with and without a visual block", "[e2e]") {
  const kvtest::TempDir dir("kvbench-e2e-visual-text");
  const std::string db = dir.path + "/results.sqlite";
  const std::string suite = dir.path + "/rag.json";
  kvtest::write_file(suite, visual_suite(kRag, ""));
  REQUIRE(run_kvbench("run --suite " + suite + " --db " + db).status == 0);
  kvtest::write_file(suite, visual_suite(kRag, R"(, "visual": {"budget": 0.5, "k_format": "f16", "v_format": "q8", "v_group": 64})"));
  REQUIRE(run_kvbench("run --suite " + suite + " --db " + db).status == 0);
  // No images: the image figures are absent, saying why.
  for (const char* name : {"visual_token_drop", "visual_kv_bytes_per_image", "visual_pages_resident"}) {
    CHECK(sql_value(db, "SELECT na_reason FROM metric_values WHERE name = '" + std::string(name) + "' AND run_id = 2") == "the workload has no images");
  }
  CHECK(figure(db, 1, "attn_mass_recall") > 0.0);
  for (const char* clock : {"exact", "model"}) {
    CAPTURE(clock);
    const std::string without = figures(db, 1, clock);
    CHECK(without.find("decode") != std::string::npos);
    CHECK(figures(db, 2, clock) == without);
  }
}
