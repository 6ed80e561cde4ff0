// End to end through the real binary: shared-context workloads with and without the prefix
// cache, their figures and series in the database.
#include <catch2/catch.hpp>
#include <string>

#include "e2e/e2e_support.h"
#include "test_support.h"

namespace {

using kvtest::Output;
using kvtest::run_kvbench;
using kvtest::sql_value;
using kvtest::sql;

const char* const kSuite = R"({"name": "prefix-e2e", "repetitions": 1,
  "models": [{"name": "syn", "backend": "synthetic", "preset": "qwen-0.5b-gqa", "sample_layers": 1}],
  "workloads": [{"name": "rag-3r", "kind": "rag", "requests": 3, "context_tokens": 1024, "gen_tokens": 8},
                {"name": "roleplay-3s", "kind": "roleplay", "sessions": 3, "turns": 2, "system_prompt_tokens": 512,
                 "user_tokens": 64, "gen_tokens": 16}],
  "policies": [{"name": "q4", "k": "q4", "v": "q4", "page_tokens": 64, "residual_tokens": 64, "sparse": {"sample_every": 4}},
               {"name": "q4-prefix", "k": "q4", "v": "q4", "page_tokens": 64, "residual_tokens": 64, "prefix_cache": true,
                "sparse": {"sample_every": 4}}]})";

// One repetition's figure (the only one when the suite runs one).
std::string figure(const std::string& db, const std::string& c, const std::string& name, int repetition = 1) {
  return sql_value(db, "SELECT CASE WHEN value IS NULL THEN 'NULL' ELSE printf('%.17g', value) END FROM metric_values WHERE case_name LIKE '%/" +
                        c + "/%' AND name = '" + name + "' AND clock != 'model' AND repetition = " + std::to_string(repetition));
}

}  // namespace

TEST_CASE("kvbench run: requests and sessions over a shared prompt, with and without the prefix cache", "[e2e][prefix]") {
  const kvtest::TempDir dir("kvbench-e2e-prefix");
  const std::string suite = dir.path + "/prefix.json", db = dir.path + "/results.sqlite";
  kvtest::write_file(suite, kSuite);
  const Output out = run_kvbench("run --suite " + suite + " --db " + db);
  INFO(out.text);
  REQUIRE(out.status == 0);
  // rag: 1024-token prompts, documents of 992 tokens; the shareable pages are those the prompt
  // would seal itself: (1024 - 64) / 64 = 15 pages = 960 tokens, for requests 2 and 3.
  CHECK(figure(db, "rag-3r/q4-prefix", "prefix_hit_tokens") == "1920");
  CHECK(std::stod(figure(db, "rag-3r/q4-prefix", "prefix_hit_rate")) == Approx(1920.0 / 3072.0));
  CHECK(figure(db, "rag-3r/q4", "prefix_hit_rate") == "NULL");  // off: NULL with its reason
  CHECK(sql_value(db, "SELECT na_reason FROM metric_values WHERE case_name LIKE '%rag-3r/q4/%' AND name = 'prefix_hit_rate'") ==
        "the policy's prefix_cache is off");
  // roleplay: 576-token first prompts; 512 / 64 = 8 pages of system prompt shared by sessions 2 and 3.
  CHECK(figure(db, "roleplay-3s/q4-prefix", "prefix_hit_tokens") == "1024");
  CHECK(figure(db, "roleplay-3s/q4-prefix", "ttft_first_turn_ms") != "NULL");
  CHECK(figure(db, "roleplay-3s/q4-prefix", "ttft_repeat_request_ms") == "NULL");
  CHECK(figure(db, "rag-3r/q4-prefix", "ttft_repeat_request_ms") != "NULL");
  // The cache changes what is computed, not what is attended: every quality figure is equal.
  for (const char* name : {"attn_mass_recall", "needle_recall", "attn_rel_error", "kv_bytes_per_token"}) {
    for (const char* w : {"rag-3r", "roleplay-3s"}) {
      INFO(w << " " << name);
      CHECK(figure(db, std::string(w) + "/q4", name) == figure(db, std::string(w) + "/q4-prefix", name));
    }
  }
  // One value per request in each series; needle recall per request where each request asks one.
  const std::string series = "SELECT count(*) FROM series s JOIN cases c ON c.id = s.case_id WHERE c.name LIKE '%";
  CHECK(sql_value(db, series + "rag-3r/q4-prefix/%' AND s.name = 'ttft_ms_by_request'") == "3");
  CHECK(sql_value(db, series + "rag-3r/q4-prefix/%' AND s.name = 'needle_recall_by_request'") == "3");
  CHECK(sql_value(db, series + "roleplay-3s/q4/%' AND s.name = 'attn_mass_recall_by_request'") == "6");
  CHECK(sql_value(db, series + "roleplay-3s/q4/%' AND s.name = 'needle_recall_by_request'") == "0");
  // Roleplay's quality by turn index over the sessions: one value per turn; its needle is asked
  // in the last turn only, so no needle series by turn.
  CHECK(sql_value(db, series + "roleplay-3s/q4/%' AND s.name = 'attn_mass_recall_by_turn'") == "2");
  CHECK(sql_value(db, series + "roleplay-3s/q4/%' AND s.name = 'needle_recall_by_turn'") == "0");
  CHECK(sql_value(db, "SELECT json_extract(meta_json, '$.prefix_cache_start') FROM runs") == "cold");
  // The report plots TTFT by request per policy.
  REQUIRE(run_kvbench("report --db " + db + " --out " + dir.path + "/report").status == 0);
  const std::string page = kvtest::file_bytes(dir.path + "/report/index.html");
  CHECK(page.find("TTFT by request: syn/rag-3r") != std::string::npos);
  CHECK(page.find("Needle recall by request: syn/rag-3r") != std::string::npos);
  CHECK(page.find("Attention mass recall by turn: syn/roleplay-3s") != std::string::npos);
}

TEST_CASE("kvbench run: prefix_warm starts each repetition with every first prompt cached, and says so", "[e2e][prefix]") {
  const kvtest::TempDir dir("kvbench-e2e-prefix-warm");
  std::string text = kSuite;
  const std::string one = "\"repetitions\": 1,";
  text.replace(text.find(one), one.size(), "\"repetitions\": 2, \"warmup\": 0, \"prefix_warm\": true,");
  const std::string suite = dir.path + "/prefix.json", db = dir.path + "/results.sqlite";
  kvtest::write_file(suite, text);
  const Output out = run_kvbench("run --suite " + suite + " --db " + db);
  INFO(out.text);
  REQUIRE(out.status == 0);
  // Every request now finds its own first prompt cached by the warm-up, request 1 included:
  // rag 3 x 960 tokens, roleplay 3 x (576 - 64) / 64 = 3 x 8 pages = 3 x 512 tokens; in each
  // repetition (the counters of the warm-up and of the repetition before are not carried).
  for (const char* rep : {"1", "2"}) {
    const auto hits = [&](const std::string& c) {
      return sql_value(db, "SELECT printf('%.17g', value) FROM metric_values WHERE case_name LIKE '%/" + c +
                            "/%' AND name = 'prefix_hit_tokens' AND repetition = " + rep);
    };
    CHECK(hits("rag-3r/q4-prefix") == "2880");
    CHECK(hits("roleplay-3s/q4-prefix") == "1536");
  }
  CHECK(figure(db, "rag-3r/q4", "prefix_hit_tokens") == "NULL");  // warm changes nothing without the cache
  CHECK(sql_value(db, "SELECT json_extract(meta_json, '$.prefix_cache_start') FROM runs") == "warm");
  CHECK(sql_value(db, "SELECT json_extract(config_json, '$.prefix_warm') FROM runs") == "1");
  const Output shown = run_kvbench("show latest --db " + db);
  CHECK(shown.text.find("prefix cache warm") != std::string::npos);
  // The quality figures do not depend on where the pages came from.
  for (const char* name : {"attn_mass_recall", "needle_recall", "kv_bytes_per_token"}) {
    INFO(name);
    CHECK(figure(db, "rag-3r/q4", name, 1) == figure(db, "rag-3r/q4-prefix", name, 1));
  }
}
