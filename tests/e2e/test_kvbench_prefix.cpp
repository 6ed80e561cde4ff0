// End to end through the real binary: shared-context workloads with and without the prefix
// cache, their figures and series in the database.
#include <catch2/catch.hpp>
#include <string>

#include "e2e/e2e_support.h"
#include "test_support.h"

namespace {

using kvtest::Output;
using kvtest::run_kvbench;
using kvtest::scalar;
using kvtest::sql;

const char* const kSuite = R"({"name": "prefix-e2e", "repetitions": 1,
  "models": [{"name": "syn", "backend": "synthetic", "preset": "qwen-0.5b-gqa", "sample_layers": 1}],
  "workloads": [{"name": "rag-3r", "kind": "rag", "requests": 3, "context_tokens": 1024, "gen_tokens": 8},
                {"name": "roleplay-3s", "kind": "roleplay", "sessions": 3, "turns": 2, "system_prompt_tokens": 512,
                 "user_tokens": 64, "gen_tokens": 16}],
  "policies": [{"name": "q4", "k": "q4", "v": "q4", "page_tokens": 64, "residual_tokens": 64, "sparse": {"sample_every": 4}},
               {"name": "q4-prefix", "k": "q4", "v": "q4", "page_tokens": 64, "residual_tokens": 64, "prefix_cache": true,
                "sparse": {"sample_every": 4}}]})";

std::string figure(const std::string& db, const std::string& c, const std::string& name) {
  return scalar(db, "SELECT CASE WHEN value IS NULL THEN 'NULL' ELSE printf('%.17g', value) END FROM metric_values WHERE case_name LIKE '%/" +
                        c + "/%' AND name = '" + name + "' AND clock != 'model'");
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
  CHECK(scalar(db, "SELECT na_reason FROM metric_values WHERE case_name LIKE '%rag-3r/q4/%' AND name = 'prefix_hit_rate'") ==
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
  CHECK(scalar(db, series + "rag-3r/q4-prefix/%' AND s.name = 'ttft_ms_by_request'") == "3");
  CHECK(scalar(db, series + "rag-3r/q4-prefix/%' AND s.name = 'needle_recall_by_request'") == "3");
  CHECK(scalar(db, series + "roleplay-3s/q4/%' AND s.name = 'attn_mass_recall_by_request'") == "6");
  CHECK(scalar(db, series + "roleplay-3s/q4/%' AND s.name = 'needle_recall_by_request'") == "0");
  // The report plots TTFT by request per policy.
  REQUIRE(run_kvbench("report --db " + db + " --out " + dir.path + "/report").status == 0);
  const std::string page = kvtest::file_bytes(dir.path + "/report/index.html");
  CHECK(page.find("TTFT by request: syn/rag-3r") != std::string::npos);
  CHECK(page.find("Needle recall by request: syn/rag-3r") != std::string::npos);
}
