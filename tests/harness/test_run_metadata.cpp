// What a run stores about itself (run_metadata.h): the resolved suite and its hash, and the
// settings a reader needs to tell two runs apart.
#include <catch2/catch.hpp>

#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "run_metadata.h"
#include "soc_profiles.h"
#include "suite_config.h"

using namespace kvbench;

namespace {

std::string suite_text(const std::string& budget) {
  return R"({"name": "meta", "seed": 1, "repetitions": 3, "warmup": 0,
    "models": [{"name": "a", "backend": "synthetic", "preset": "llama-7b-gqa", "sample_layers": 1}],
    "workloads": [{"name": "rag", "kind": "rag", "context_tokens": 1024, "gen_tokens": 8}],
    "policies": [{"name": "q4", "k": "q4", "v": "q4", "sparse": {"selector": "hybrid", "sinks": 4, "window": 64, "budget": )" +
         budget + R"(}}],
    "socs": ["host", "raspberry-pi-5"]})";
}

}  // namespace

TEST_CASE("a run describes its suite by hash and its settings in meta", "[harness]") {
  const SuiteConfig suite = parse_suite(suite_text("0.25"), "meta.json", ".");
  RunOptions options;
  options.filter = "rag";
  options.tags = {"nightly", "pr-7"};
  const std::map<std::string, kv::soc::SocProfile> profiles = {{"raspberry-pi-5", load_soc_profile("raspberry-pi-5", "")}};
  RunSettings settings;
  settings.repetitions = 2;
  settings.models_dir = "/models";
  settings.l2_dir = "/tmp/l2";
  settings.l2_fs_type = "none (no policy offloads)";
  settings.profiles = &profiles;
  const RunInfo info = describe_run(suite, options, settings);

  CHECK(std::regex_match(info.config_hash, std::regex("[0-9a-f]{16}")));
  CHECK(info.config_hash == config_hash(info.config_json));
  CHECK(info.config_json == resolved_json(suite));
  CHECK(info.tags == options.tags);
  CHECK_FALSE(info.git_sha.empty());

  const nlohmann::json meta = nlohmann::json::parse(info.meta_json);
  CHECK(meta.at("suite") == "meta");
  CHECK(meta.at("suite_file") == "meta.json");
  CHECK(meta.at("filter") == "rag");
  CHECK(meta.at("repetitions") == 2);
  CHECK(meta.at("prefix_cache_start") == "cold");
  CHECK(meta.at("models_dir") == "/models");
  CHECK(meta.at("l2_dir") == "/tmp/l2");
  CHECK(meta.at("l2_fs_type") == "none (no policy offloads)");
  CHECK(meta.at("soc_profiles").at("raspberry-pi-5").at("hash") == profiles.at("raspberry-pi-5").hash);
  CHECK(meta.contains("kernel_path"));
  CHECK(meta.contains("kvbench_version"));
  CHECK(meta.contains("build_type"));
}

TEST_CASE("two suites that differ in one figure of a policy hash apart, the same suite alike", "[harness]") {
  const SuiteConfig a = parse_suite(suite_text("0.25"), "meta.json", ".");
  const SuiteConfig b = parse_suite(suite_text("0.2"), "meta.json", ".");
  CHECK(config_hash(resolved_json(a)) == config_hash(resolved_json(parse_suite(suite_text("0.25"), "meta.json", "."))));
  CHECK(config_hash(resolved_json(a)) != config_hash(resolved_json(b)));
}
