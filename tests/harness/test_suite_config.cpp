#include <catch2/catch.hpp>

#include <algorithm>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include "builtin_suites.h"
#include "runtime/error.h"
#include "soc_profiles.h"
#include "suite_config.h"
#include "test_support.h"

using namespace kvbench;

namespace {

// An example suite, with a placeholder to swap one fragment at a time.
std::string suite(const std::string& policy_extra = "", const std::string& top_extra = "") {
  return R"({
    "name": "smoke", "seed": 1, "repetitions": 5, "warmup": 1)" + top_extra + R"(,
    "models":    [{"name": "syn-7b", "backend": "synthetic", "preset": "llama-7b-gqa", "sample_layers": 2},
                  {"name": "stories260k", "backend": "llama", "path": "stories260K.bin", "tokenizer": "tok512.bin"}],
    "workloads": [{"name": "rag-16k", "kind": "rag", "context_tokens": 16384, "gen_tokens": 32, "ttft_target_ms": 1500, "tpot_target_ms": 66}],
    "policies":  [{"name": "q4-hybrid", "k": "q4", "v": "q4", "v_group": 32, "residual_tokens": 64, "page_tokens": 64,
                   "sparse": {"selector": "hybrid", "sinks": 4, "window": 256, "budget": 0.10},
                   "memory": {"l0_bytes": "8MiB", "l1_bytes": "256MiB", "l2_dir": "", "prefetch_lookahead": 2})" +
         policy_extra + R"(}],
    "socs": ["host"]
  })";
}

// The example suite with a `synthetic` block on its synthetic model.
std::string with_synthetic(const std::string& block) {
  std::string text = suite();
  text.replace(text.find("\"sample_layers\": 2"), 18, "\"sample_layers\": 2, \"synthetic\": " + block);
  return text;
}

// The error a suite text raises: where (file), field (JSON path) and reason.
kv::InputError error_of(const std::string& text) {
  try {
    parse_suite(text, "suite.json", ".");
  } catch (const kv::InputError& e) {
    return e;
  }
  FAIL("the suite was accepted");
  return kv::InputError("", "", "");
}

}  // namespace

TEST_CASE("the example suite parses into typed configs", "[config]") {
  const SuiteConfig s = parse_suite(suite(), "suite.json", ".");
  CHECK(s.name == "smoke");
  CHECK(s.repetitions == 5);
  CHECK(s.warmup == 1);
  CHECK(s.noise_threshold == Approx(0.10));
  CHECK_FALSE(s.prefix_warm);
  CHECK(resolved_json(s).find("prefix_warm") == std::string::npos);  // only when set: older hashes stay
  const SuiteConfig warm = parse_suite(suite("", R"(, "prefix_warm": true)"), "suite.json", ".");
  CHECK(warm.prefix_warm);
  CHECK(resolved_json(warm).find("\"prefix_warm\":true") != std::string::npos);
  REQUIRE(s.models.size() == 2);
  CHECK(s.models[0].preset == "llama-7b-gqa");
  CHECK(s.models[1].tokenizer == "tok512.bin");
  REQUIRE(s.workloads.size() == 1);
  CHECK(s.workloads[0].context_tokens == 16384);
  CHECK(s.workloads[0].tpot_target_ms == 66);
  REQUIRE(s.policies.size() == 1);
  const PolicyConfig& p = s.policies[0];
  CHECK(p.cache.k_format == kv::Format::Q4);
  CHECK(p.cache.residual_tokens == 64);
  CHECK(p.sparse.selector == kv::Selector::Hybrid);
  CHECK(p.sparse.budget == Approx(0.10f));
  CHECK(p.cache.memory.l0_bytes == 8u << 20);
  CHECK(p.cache.memory.l1_bytes == 256u << 20);
  CHECK(p.cache.memory.pin_window_tokens == 256);
  CHECK(p.cache.memory.l2.dir.empty());
  CHECK(s.socs == std::vector<std::string>{"host"});
}

TEST_CASE("malformed suites are refused with the file, the JSON path and the reason", "[config]") {
  struct Case {
    std::string text, path, reason;
  };
  const std::vector<Case> cases = {
      {suite(R"(, "sparse_typo": 1)"), "/policies/0/sparse_typo", "unknown field"},
      {suite("", R"(, "repetitions": 3)"), "repetitions", "duplicate key"},
      {suite("", R"(, "noise_threshold": "high")"), "/noise_threshold", "must be a number"},
      {suite("", R"(, "prefix_warm": "yes")"), "/prefix_warm", "must be true or false"},
      {suite(R"(, "speculative": {"draft": "tiny"})"), "/policies/0/speculative/draft", "is not a draft kvbench runs"},
      {suite(R"(, "speculative": {"draft": "layers:0"})"), "/policies/0/speculative/draft", "is not a draft kvbench runs"},
      {suite(R"(, "speculative": {"draft": "layers:x"})"), "/policies/0/speculative/draft", "is not a draft kvbench runs"},
      {suite(R"(, "speculative": {"draft": "layers:2", "draft_v_format": "q4"})"), "/policies/0/speculative/draft_v_format",
       "no KV copy of its own"},
      {suite(R"(, "speculative": {"k": 16})"), "/policies/0/speculative/k", ""},
      {suite(R"(, "speculative": {"accept_rate": 1.5})"), "/policies/0/speculative/accept_rate", "must be in [0, 1]"},
      {suite(R"(, "speculative": {"draft_k_format": "q3"})"), "/policies/0/speculative", "q3"},
      {suite(R"(, "speculative": {"kk": 2})"), "/policies/0/speculative/kk", "unknown field"},
      {suite(R"(, "speculative": {})"), "/policies/0/speculative", "selector \"full\""},
      {R"({"name": "x", "models": [], "workloads": [1], "policies": [1]})", "/models", "must be a non-empty array"},
      {suite().replace(suite().find("0.10"), 4, "1.5"), "/policies/0/sparse/budget", "(0, 1]"},
      {suite().replace(suite().find("\"8MiB\""), 6, "\"512MiB\""), "/policies/0/memory/l0_bytes", "L0 is larger than L1"},
      {suite().replace(suite().find("\"256MiB\""), 8, "\"256 parsecs\""), "/policies/0/memory/l1_bytes", "is not a unit"},
      {suite().replace(suite().find("\"256MiB\""), 8, "\"256MiB\", \"l2_overprovision\": 0.95"), "/policies/0/memory/l2_overprovision",
       "must be in [0, 0.9]"},
      {suite().replace(suite().find("\"256MiB\""), 8, "\"256MiB\", \"selection_shift\": 0"), "/policies/0/memory/selection_shift",
       "must be in (0, 1]"},
      {suite().replace(suite().find("llama-7b-gqa"), 12, "llama-9b"), "/models/0/preset", "llama-9b"},
      {suite().replace(suite().find("\"rag\""), 5, "\"chat\""), "/workloads/0/kind", "not a workload kind"},
      {suite().replace(suite().find("\"q4\""), 4, "\"q3\""), "/policies/0/k", "q3"},
      {suite().substr(0, 40), "byte", "malformed JSON"},
      {suite().replace(suite().find("\"sample_layers\": 2"), 18, "\"weights\": \"q3\""), "/models/0/weights", "'q3' is not one of f16, q8, q4"},
      {suite().replace(suite().find("\"tokenizer\": \"tok512.bin\""), 25, "\"tokenizer\": \"tok512.bin\", \"weights\": \"q4\""),
       "/models/1/weights", "unknown field"},
      {with_synthetic(R"({"statistics": "realistic"})"), "/models/0/synthetic/statistics", "not one of published, uniform-heads"},
      {with_synthetic(R"({"retrieval": {"sink_mass": 0.9}})"), "/models/0/synthetic/retrieval/sink_mass", "floor"},
      {with_synthetic(R"({"heavy_mass": 0.3})"), "/models/0/synthetic/heavy_mass", "uniform-heads knob"},
      {with_synthetic(R"({"streaming_share": 0.9})"), "/models/0/synthetic/streaming_share", "must be 1"},
      {with_synthetic(R"({"span_sigma": "wide"})"), "/models/0/synthetic/span_sigma", "must be a number"},
      {with_synthetic(R"({"diffuse": {"span_weight": 1}})"), "/models/0/synthetic/diffuse/span_weight", "unknown field"},
      {with_synthetic(R"({"statistics": "uniform-heads", "sink_mass": 0.9})"), "/models/0/synthetic/sink_mass", "tail"},
      {suite(R"(, "visual": {"min_pages_per_image": 2})"), "/policies/0/visual/budget", "is required"},
      {suite(R"(, "visual": {"budget": 0})"), "/policies/0/visual/budget", "must be in (0, 1]"},
      {suite(R"(, "visual": {"budget": 0.1, "min_pages_per_image": 0})"), "/policies/0/visual/min_pages_per_image", "0 must be in 1.."},
      {suite(R"(, "visual": {"budget": 0.1, "tier": "flash"})"), "/policies/0/visual/tier", "'flash' is not a tier of image pages (l1 or l2)"},
      {suite(R"(, "visual": {"budget": 0.1, "tier": "l2"})").replace(suite().find("\"l1_bytes\": \"256MiB\", "), 22, ""), "/policies/0/visual/tier",
       "l2 needs an L1 cap (memory.l1_bytes)"},
      {suite(R"(, "visual": {"budget": 0.1, "v_group": 12})"), "/policies/0/visual/v_group", "must be a multiple of 8"},
      {suite(R"(, "visual": {"budget": 0.1, "k_format": "q3"})"), "/policies/0/visual/k_format", "unknown format 'q3'"},
      {suite(R"(, "visual": {"budget": 0.1, "v_format": 4})"), "/policies/0/visual/v_format", "string"},
      {suite(R"(, "visual": {"budget": 0.1, "pages": 3})"), "/policies/0/visual/pages", "unknown field"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.path, c.reason);
    const kv::InputError e = error_of(c.text);
    CHECK(e.where() == "suite.json");
    CHECK_THAT(e.field(), Catch::Contains(c.path));
    CHECK_THAT(e.reason(), Catch::Contains(c.reason));
  }
}

TEST_CASE("named policies resolve beside the suite, sizes take units", "[config]") {
  kvtest::TempDir dir("suite-named");
  std::filesystem::create_directories(dir.path + "/policies");
  std::ofstream(dir.path + "/policies/f16-full.json") << R"({"name": "f16-full", "k": "f16", "v": "f16"})";
  std::string text = suite();
  const auto begin = text.find("[{\"name\": \"q4-hybrid\"");
  const auto end = text.find("\"socs\"");
  text.replace(begin, end - begin, R"(["f16-full"], )");
  std::ofstream(dir.path + "/suite.json") << text;
  const SuiteConfig s = load_suite(dir.path + "/suite.json");
  REQUIRE(s.policies.size() == 1);
  CHECK(s.policies[0].name == "f16-full");
  CHECK(s.policies[0].sparse.selector == kv::Selector::Full);
  // A named policy that does not exist names its file.
  text.replace(text.find("f16-full"), 8, "missing");
  std::ofstream(dir.path + "/suite.json") << text;
  CHECK_THROWS_WITH(load_suite(dir.path + "/suite.json"), Catch::Contains("policies/missing.json"));
  CHECK(parse_size("64MiB", "f", "/x") == 64u << 20);
  CHECK(parse_size("1.5 KiB", "f", "/x") == 1536);
  CHECK(parse_size("2GB", "f", "/x") == 2'000'000'000ull);
  CHECK(parse_size("4096", "f", "/x") == 4096);
  CHECK_THROWS_WITH(parse_size("-1MiB", "f", "/x"), Catch::Contains("non-negative"));
}

TEST_CASE("a suite in configs/suites/ finds the named policies of configs/policies/", "[config]") {
  kvtest::TempDir dir("suite-configs");
  std::filesystem::create_directories(dir.path + "/suites");
  std::string text = suite();
  const auto begin = text.find("[{\"name\": \"q4-hybrid\"");
  const auto end = text.find("\"socs\"");
  text.replace(begin, end - begin, R"(["q4-hybrid", "f16-full"], )");
  // The shipped named policies, read from the source tree's configs/policies.
  std::filesystem::copy(std::string(KVBENCH_SOURCE_DIR) + "/configs/policies", dir.path + "/policies");
  std::ofstream(dir.path + "/suites/mine.json") << text;
  const SuiteConfig s = load_suite(dir.path + "/suites/mine.json");
  REQUIRE(s.policies.size() == 2);
  CHECK(s.policies[0].cache.k_format == kv::Format::Q4);
  CHECK(s.policies[0].sparse.selector == kv::Selector::Hybrid);
  CHECK(s.policies[1].sparse.selector == kv::Selector::Full);
}

TEST_CASE("socs that name no profile are refused", "[config]") {
  std::string text = suite();
  text.replace(text.find("[\"host\"]"), 8, "[\"host\", \"sd8g3\"]");
  const kv::InputError e = error_of(text);
  CHECK(e.field() == "/socs/1");
  CHECK_THAT(e.reason(), Catch::Contains("unknown SoC profile 'sd8g3'"));
}

TEST_CASE("the built-in suites parse and hold what the README says", "[config]") {
  std::map<std::string, SuiteConfig> suites;
  for (const auto& [name, text] : kvbench::builtin_suites()) suites.emplace(name, parse_suite(text, "builtin:" + name, "."));
  REQUIRE(suites.size() == 6);
  const SuiteConfig& nightly = suites.at("nightly");
  CHECK(nightly.repetitions == 5);
  CHECK(nightly.models.size() == 1);
  CHECK(nightly.models[0].preset == "llama-7b-gqa");
  CHECK(nightly.models[0].sample_layers == 2);
  std::set<std::string> kinds;
  for (const auto& w : nightly.workloads) kinds.insert(w.kind);
  CHECK(kinds == std::set<std::string>{"rag", "codebase", "roleplay", "multimodal"});
  CHECK(nightly.policies.size() == 3);
  CHECK(nightly.policies[2].cache.memory.l1_bytes > 0);
  CHECK(suites.at("smoke").workloads.size() == 4);
  CHECK(suites.at("accuracy").models[0].backend == "llama");
  // The priced phone deployment: 7B with INT4 weights, 32K RAG, q4 K/V with and without
  // hybrid 10%, on every shipped profile.
  const SuiteConfig& reference = suites.at("soc-reference");
  CHECK(reference.models[0].preset == "llama-7b-gqa-int4w");
  CHECK(reference.workloads[0].context_tokens == 32768);
  REQUIRE(reference.policies.size() == 2);
  CHECK(reference.policies[1].sparse.budget == Approx(0.10));
  std::vector<std::string> shipped;
  for (const auto& [name, body] : kvbench::builtin_soc_profiles()) shipped.push_back(name);
  std::vector<std::string> listed = reference.socs;
  std::sort(listed.begin(), listed.end());
  std::sort(shipped.begin(), shipped.end());
  CHECK(listed == shipped);
  // Shared contexts: roleplay sessions over one system prompt and rag requests over one
  // document, each with and without the prefix cache.
  const SuiteConfig& prefix = suites.at("prefix");
  REQUIRE(prefix.workloads.size() == 2);
  CHECK(prefix.workloads[0].sessions == 5);
  CHECK(prefix.workloads[0].system_prompt_tokens == 2048);
  CHECK(prefix.workloads[1].requests == 8);
  CHECK(prefix.workloads[1].full_prefill);
  REQUIRE(prefix.policies.size() == 2);
  CHECK_FALSE(prefix.policies[0].cache.prefix_cache);
  CHECK(prefix.policies[1].cache.prefix_cache);
  // The sim clock's suite: counted, one repetition, and the L2 path among its cases.
  const SuiteConfig& gate_sim = suites.at("gate-sim");
  CHECK(gate_sim.sim);
  CHECK(gate_sim.repetitions == 1);
  CHECK(std::any_of(gate_sim.policies.begin(), gate_sim.policies.end(), [](const PolicyConfig& p) { return p.cache.memory.l1_bytes > 0; }));
}

TEST_CASE("shared-context fields belong to their kinds and resolve with their defaults", "[config][prefix]") {
  const auto with_workload = [](const std::string& workload) {
    return std::string(R"({"name": "m", "models": [{"name": "s", "backend": "synthetic", "preset": "qwen-0.5b-gqa"}], "workloads": [)") +
           workload + R"(], "policies": [{"name": "p", "prefix_cache": true}]})";
  };
  for (const auto& [field, kind] : {std::pair<std::string, std::string>{"requests", "roleplay"}, {"sessions", "rag"},
                                    {"system_prompt_tokens", "codebase"}, {"user_tokens", "multimodal"}}) {
    const std::string text = with_workload(R"({"name": "w", "kind": ")" + kind + R"(", ")" + field + R"(": 2})");
    CHECK_THROWS_WITH(parse_suite(text, "m.json", "."), Catch::Contains(field) && Catch::Contains("does not use it"));
  }
  const SuiteConfig roleplay = parse_suite(with_workload(R"({"name": "w", "kind": "roleplay", "sessions": 3})"), "m.json", ".");
  CHECK(roleplay.policies[0].cache.prefix_cache);
  const auto resolved = nlohmann::json::parse(resolved_json(roleplay));
  CHECK(resolved["workloads"][0]["sessions"] == 3);
  CHECK(resolved["workloads"][0]["user_tokens"] == 128);
  CHECK(resolved["workloads"][0]["system_prompt_tokens"] == 512);
  CHECK(resolved["policies"][0]["prefix_cache"] == true);
  CHECK_THROWS_WITH(parse_suite(with_workload(R"({"name": "w", "kind": "rag", "requests": -1})"), "m.json", "."),
                    Catch::Contains("requests"));
}

TEST_CASE("the resolved configuration prints floats as they were written", "[config]") {
  const std::string resolved = resolved_json(parse_suite(suite(), "suite.json", "."));
  INFO(resolved);
  CHECK(resolved.find("\"budget\":0.1,") != std::string::npos);
  CHECK(resolved.find("\"importance_decay\":0.9") != std::string::npos);
  CHECK(resolved.find("99999") == std::string::npos);
  CHECK(resolved.find("00000001") == std::string::npos);
}

namespace {

// docs/suites.md's field rows: "| `path` | default | meaning |".
std::map<std::string, std::string> documented_defaults(const std::string& text) {
  std::map<std::string, std::string> rows;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    const auto end = line.find('`', 3);
    const auto bar = line.find('|', end);
    const auto next = line.find('|', bar + 1);
    if (end == std::string::npos || bar == std::string::npos || next == std::string::npos) continue;
    std::string value = line.substr(bar + 1, next - bar - 1);
    value = value.substr(value.find_first_not_of(' '));
    value = value.substr(0, value.find_last_not_of(' ') + 1);
    rows[line.substr(3, end - 3)] = value;
  }
  return rows;
}

}  // namespace

TEST_CASE("docs/suites.md states the parser's defaults for every field", "[config][docs]") {
  const std::string minimal = R"({"name": "m",
    "models": [{"name": "s", "backend": "synthetic", "preset": "qwen-0.5b-gqa"}, {"name": "l", "backend": "llama", "path": "a.bin", "tokenizer": "t.bin"}],
    "workloads": [{"name": "a", "kind": "rag"}, {"name": "b", "kind": "codebase"}, {"name": "c", "kind": "roleplay"},
                  {"name": "d", "kind": "multimodal"}, {"name": "e", "kind": "perplexity"}],
    "policies": [{"name": "p"}]})";
  const auto resolved = nlohmann::json::parse(resolved_json(parse_suite(minimal, "m.json", ".")));
  const std::string page = kvtest::file_bytes(std::string(KVBENCH_SOURCE_DIR) + "/docs/suites.md");
  REQUIRE(!page.empty());
  const auto rows = documented_defaults(page);
  // The resolved value a documented path names.
  const auto lookup = [&](const std::string& path) -> const nlohmann::json* {
    const auto dot = path.find('.');
    const std::string head = path.substr(0, dot);
    std::string rest = path.substr(dot + 1);
    const nlohmann::json* node = &resolved;
    if (head == "models[synthetic]" || head == "models[]") node = &resolved["models"][0];
    else if (head == "models[llama]") node = &resolved["models"][1];
    else if (head == "workloads[]") node = &resolved["workloads"][0];
    else if (head == "policies[]") node = &resolved["policies"][0];
    else if (head != "suite") return nullptr;
    for (std::size_t at = 0; at != std::string::npos;) {
      const auto next = rest.find('.', at);
      const std::string key = rest.substr(at, next == std::string::npos ? std::string::npos : next - at);
      if (!node->contains(key)) return nullptr;
      node = &(*node)[key];
      at = next == std::string::npos ? next : next + 1;
    }
    return node;
  };
  int checked = 0;
  for (const auto& [path, value] : rows) {
    if (value.size() < 2 || value.front() != '`') continue;  // "required", "by kind"
    const nlohmann::json* actual = lookup(path);
    INFO(path << " documented " << value);
    REQUIRE(actual != nullptr);
    const auto documented = nlohmann::json::parse(value.substr(1, value.size() - 2));
    if (documented.is_number()) {
      CHECK(documented.get<double>() == Approx(actual->get<double>()));
    } else {
      CHECK(documented == *actual);
    }
    ++checked;
  }
  CHECK(checked >= 40);
  // Every resolved field of a policy, its sparse and memory sections and a workload has a row.
  const auto every_key = [&](const nlohmann::json& node, const std::string& prefix) {
    for (const auto& [key, value] : node.items()) {
      if (value.is_object()) continue;
      INFO(prefix + key);
      CHECK(rows.count(prefix + key) == 1);
    }
  };
  every_key(resolved["policies"][0], "policies[].");
  every_key(resolved["policies"][0]["sparse"], "policies[].sparse.");
  every_key(resolved["policies"][0]["memory"], "policies[].memory.");
  every_key(resolved["workloads"][0], "workloads[].");
  // The kinds' defaults table.
  std::istringstream lines(page);
  int kinds = 0;
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, std::regex(R"(\| `(\w+)` \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|)"))) continue;
    for (const auto& w : resolved["workloads"]) {
      if (w["kind"] != m[1].str()) continue;
      INFO(line);
      CHECK(w["context_tokens"] == std::stoi(m[2]));
      CHECK(w["gen_tokens"] == std::stoi(m[3]));
      CHECK(w["turns"] == std::stoi(m[4]));
      CHECK(w["images"] == std::stoi(m[5]));
      CHECK(w["visual_tokens"] == std::stoi(m[6]));
      ++kinds;
    }
  }
  CHECK(kinds == 5);
}

TEST_CASE("a synthetic model's statistics: published unless the suite chooses, every knob resolved", "[config]") {
  const SuiteConfig plain = parse_suite(suite(), "suite.json", ".");
  CHECK(plain.models[0].synthetic.statistics == kv::SyntheticStatistics::Published);
  const auto resolved = nlohmann::json::parse(resolved_json(plain));
  CHECK(resolved["models"][0]["synthetic"]["statistics"] == "published");
  CHECK(resolved["models"][0]["synthetic"]["retrieval"]["span_mass"] == Approx(0.52));
  CHECK(resolved["models"][0]["synthetic"]["adjacent_layer_share"] == Approx(0.8));
  CHECK_FALSE(resolved["models"][1].contains("synthetic"));
  const SuiteConfig chosen = parse_suite(with_synthetic(R"({"retrieval_share": 0.5, "streaming_share": 0.42, "retrieval": {"span_mass": 0.55}})"),
                                         "suite.json", ".");
  CHECK(chosen.models[0].synthetic.mix.retrieval_share == Approx(0.5f));
  CHECK(chosen.models[0].synthetic.mix.retrieval.span == Approx(0.55f));
  CHECK(chosen.models[0].synthetic.mix.retrieval.sink == Approx(0.25f));  // the rest keep their defaults
  const SuiteConfig uniform = parse_suite(with_synthetic(R"({"statistics": "uniform-heads"})"), "suite.json", ".");
  CHECK(uniform.models[0].synthetic.statistics == kv::SyntheticStatistics::UniformHeads);
  const auto uniform_json = nlohmann::json::parse(resolved_json(uniform))["models"][0]["synthetic"];
  CHECK(uniform_json["statistics"] == "uniform-heads");
  CHECK(uniform_json["heavy_mass"] == Approx(0.20));
  CHECK_FALSE(uniform_json.contains("retrieval_share"));  // only the knobs its statistics use
}

TEST_CASE("a synthetic model's weight precision: the preset's unless the suite chooses one", "[config]") {
  const SuiteConfig parsed = parse_suite(suite(), "suite.json", ".");
  CHECK(parsed.models[0].weights == "f16");
  const auto resolved = nlohmann::json::parse(resolved_json(parsed));
  CHECK(resolved["models"][0]["weights"] == "f16");
  CHECK_FALSE(resolved["models"][1].contains("weights"));  // a checkpoint's weights are its own
  std::string q4 = suite();
  q4.replace(q4.find("\"sample_layers\": 2"), 18, "\"sample_layers\": 2, \"weights\": \"q4\"");
  CHECK(parse_suite(q4, "suite.json", ".").models[0].weights == "q4");
  // q4 on the f16 preset is the shipped int4w preset: the same bits, groups and geometry.
  const kv::SyntheticPreset& f16 = kv::find_synthetic_preset("llama-7b-gqa", "test");
  const kv::SyntheticPreset& int4w = kv::find_synthetic_preset("llama-7b-gqa-int4w", "test");
  CHECK(weight_precision_name(f16) == "f16");
  CHECK(weight_precision_name(int4w) == "q4");
  const kv::SyntheticPreset chosen = with_weights(f16, "q4");
  CHECK(chosen.weight_bits == int4w.weight_bits);
  CHECK(chosen.weight_group == int4w.weight_group);
  CHECK(with_weights(int4w, "f16").weight_bits == 16);
  CHECK(with_weights(int4w, "f16").weight_group == 0);
  CHECK(with_weights(f16, "q8").weight_bits == 8);
}

TEST_CASE("a policy's speculative block: its defaults, and the resolved configuration names it only when set", "[config]") {
  std::string text = suite(R"(, "speculative": {"k": 6, "draft_v_format": "q4"})");
  const std::string sparse = R"("selector": "hybrid", "sinks": 4, "window": 256, "budget": 0.10)";
  text.replace(text.find(sparse), sparse.size(), R"("selector": "full")");
  const SuiteConfig s = parse_suite(text, "suite.json", ".");
  const SpeculativeConfig& spec = s.policies[0].speculative;
  CHECK(spec.enabled);
  CHECK(spec.draft == "kv");
  CHECK(spec.k == 6);
  CHECK(spec.draft_k_format == kv::Format::Q2);
  CHECK(spec.draft_v_format == kv::Format::Q4);
  CHECK(spec.accept_rate == Approx(0.7));
  CHECK(resolved_json(s).find("\"speculative\":{\"accept_rate\":0.7,\"draft\":\"kv\"") != std::string::npos);
  CHECK(resolved_json(parse_suite(suite(), "suite.json", ".")).find("speculative") == std::string::npos);
  CHECK(spec.draft_layers == 0);
  CHECK(spec.draft_preset.empty());
  // The other drafts: the model's first layers, and a synthetic preset.
  std::string layers = text;
  const std::string formats = "\"k\": 6, \"draft_v_format\": \"q4\"";  // a layers:N draft has no copy to format
  layers.replace(layers.find(formats), formats.size(), "\"k\": 6, \"draft\": \"layers:12\"");
  CHECK(parse_suite(layers, "suite.json", ".").policies[0].speculative.draft_layers == 12);
  std::string preset = text;
  preset.replace(preset.find("\"k\": 6"), 6, "\"k\": 6, \"draft\": \"qwen-0.5b-gqa\"");
  const SpeculativeConfig small = parse_suite(preset, "suite.json", ".").policies[0].speculative;
  CHECK(small.draft_preset == "qwen-0.5b-gqa");
  CHECK(small.draft_layers == 0);
  // Not with the prefix cache: the draft's copy would miss the shared pages.
  std::string both = text;
  both.replace(both.find("\"page_tokens\": 64"), 17, "\"page_tokens\": 64, \"prefix_cache\": true");
  CHECK_THROWS_WITH(parse_suite(both, "suite.json", "."), Catch::Contains("prefix_cache"));
}

TEST_CASE("a policy's visual block: a budget per image, named in the resolved configuration only when set", "[config]") {
  const SuiteConfig s = parse_suite(suite(R"(, "visual": {"budget": 0.1})"), "suite.json", ".");
  CHECK(s.policies[0].sparse.visual.budget == 0.1f);
  CHECK(s.policies[0].sparse.visual.min_pages_per_image == 1);
  CHECK(resolved_json(s).find(R"("visual":{"budget":0.1,"min_pages_per_image":1})") != std::string::npos);
  CHECK(parse_suite(suite(R"(, "visual": {"budget": 0.25, "min_pages_per_image": 3})"), "suite.json", ".")
            .policies[0].sparse.visual.min_pages_per_image == 3);
  const SuiteConfig plain = parse_suite(suite(), "suite.json", ".");
  CHECK_FALSE(plain.policies[0].sparse.visual.enabled());
  CHECK(resolved_json(plain).find("\"visual\"") == std::string::npos);  // a policy without it keeps its hash
  // Formats of its own: the ones it names, the policy's for the rest, named in the resolved
  // configuration only when set.
  const SuiteConfig own = parse_suite(suite(R"(, "visual": {"budget": 0.1, "v_group": 128})"), "suite.json", ".");
  const kv::VisualPages& format = own.policies[0].cache.visual;
  CHECK(format.own);
  CHECK(format.k_format == kv::Format::Q4);
  CHECK(format.v_format == kv::Format::Q4);
  CHECK(format.v_group == 128);
  CHECK(resolved_json(own).find(R"("visual":{"budget":0.1,"k_format":"q4","min_pages_per_image":1,"v_format":"q4","v_group":128})") !=
        std::string::npos);
  const kv::VisualPages f16 = parse_suite(suite(R"(, "visual": {"budget": 0.1, "k_format": "f16"})"), "suite.json", ".")
                                       .policies[0].cache.visual;
  CHECK(f16.k_format == kv::Format::F16);
  CHECK(f16.v_group == 32);
  CHECK_FALSE(s.policies[0].cache.visual.own);
  // A tier of their own: named only when l2.
  CHECK(s.policies[0].cache.visual.tier == kv::VisualTier::L1);
  const SuiteConfig l2 = parse_suite(suite(R"(, "visual": {"budget": 0.1, "tier": "l2"})"), "suite.json", ".");
  CHECK(l2.policies[0].cache.visual.tier == kv::VisualTier::L2);
  CHECK_FALSE(l2.policies[0].cache.visual.own);
  CHECK(resolved_json(l2).find(R"("visual":{"budget":0.1,"min_pages_per_image":1,"tier":"l2"})") != std::string::npos);
  CHECK(parse_suite(suite(R"(, "visual": {"budget": 0.1, "tier": "l1"})"), "suite.json", ".").policies[0].cache.visual.tier ==
        kv::VisualTier::L1);
  // Not with the full selector: it keeps every page.
  std::string full = suite(R"(, "visual": {"budget": 0.1})");
  const std::string sparse = R"("selector": "hybrid", "sinks": 4, "window": 256, "budget": 0.10)";
  full.replace(full.find(sparse), sparse.size(), R"("selector": "full")");
  const kv::InputError e = error_of(full);
  CHECK(e.field() == "/policies/0/visual/budget");
  CHECK_THAT(e.reason(), Catch::Contains("needs a sparse selector"));
}

TEST_CASE("a suite's device block: a start temperature and a timeout, named in the resolved configuration only when set", "[config]") {
  const SuiteConfig s = parse_suite(suite("", R"(, "device": {"max_start_temp_c": 45, "cool_timeout_s": 120})"), "suite.json", ".");
  REQUIRE(s.device.max_start_temp_c);
  CHECK(*s.device.max_start_temp_c == 45.0);
  CHECK(s.device.cool_timeout_s == 120.0);
  CHECK(resolved_json(s).find(R"("device":{"cool_timeout_s":120.0,"max_start_temp_c":45.0})") != std::string::npos);
  const SuiteConfig plain = parse_suite(suite(), "suite.json", ".");
  CHECK_FALSE(plain.device.max_start_temp_c);
  CHECK(resolved_json(plain).find("device") == std::string::npos);  // suites without it keep their hash
  const auto refused = [](const std::string& device, const std::string& field, const std::string& reason) {
    CHECK_THROWS_WITH(parse_suite(suite("", R"(, "device": )" + device), "suite.json", "."),
                      Catch::Contains("suite.json") && Catch::Contains(field) && Catch::Contains(reason));
  };
  refused(R"({"max_start_temp_c": -5})", "/device/max_start_temp_c", "(0, 150]");
  refused(R"({"max_start_temp_c": 45, "cool_timeout_s": -1})", "/device/cool_timeout_s", "[0, 86400]");
  refused(R"({"cool_timeout_s": 60})", "/device/cool_timeout_s", "needs max_start_temp_c");
  refused(R"({"max_start_temp": 45})", "/device/max_start_temp", "unknown field");
}

TEST_CASE("a suite's sim flag and a policy's test_repeat_attention: named in the resolved configuration only when set", "[config][sim]") {
  const SuiteConfig plain = parse_suite(suite(), "suite.json", ".");
  CHECK_FALSE(plain.sim);
  CHECK(plain.policies[0].cache.test_repeat_attention == 0.0);
  CHECK(resolved_json(plain).find("\"sim\"") == std::string::npos);
  CHECK(resolved_json(plain).find("test_repeat_attention") == std::string::npos);
  const SuiteConfig counted = parse_suite(suite(R"(, "test_repeat_attention": 0.05)", R"(, "sim": true)"), "suite.json", ".");
  CHECK(counted.sim);
  CHECK(counted.policies[0].cache.test_repeat_attention == 0.05);
  CHECK(resolved_json(counted).find("\"sim\":true") != std::string::npos);
  CHECK(resolved_json(counted).find("\"test_repeat_attention\":0.05") != std::string::npos);
  for (const auto& [text, path, reason] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {suite("", R"(, "sim": 1)"), "/sim", "must be true or false"},
           {suite(R"(, "test_repeat_attention": -0.1)"), "/policies/0/test_repeat_attention", "must be in [0, 100]"},
           {suite(R"(, "test_repeat_attention": "some")"), "/policies/0/test_repeat_attention", "must be a number"}}) {
    const kv::InputError e = error_of(text);
    CHECK(e.field() == path);
    CHECK(e.reason().find(reason) != std::string::npos);
  }
}
