// SoC profiles: the compiled-in ones load with a source or derivation for every number;
// malformed profiles are refused with the file, the JSON path and the reason; a database's own
// host profile takes precedence over the compiled-in one.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include <nlohmann/json.hpp>

#include "runtime/error.h"
#include "soc_profiles.h"
#include "test_support.h"

namespace {

using json = nlohmann::json;
using kvbench::parse_soc_profile;

const std::string& host_text() {
  for (const auto& [name, text] : kvbench::builtin_soc_profiles()) {
    if (name == "host") return text;
  }
  FAIL("no built-in host profile");
  static std::string none;
  return none;
}

// The error a mutated host profile gets.
kv::InputError refusal(const std::function<void(json&)>& mutate) {
  json j = json::parse(host_text());
  mutate(j);
  try {
    parse_soc_profile(j.dump(), "bad.json");
  } catch (const kv::InputError& e) {
    return e;
  }
  FAIL("the profile was accepted");
  return kv::InputError("", "", "");
}

void every_quantity(const json& j, const std::string& path, const std::function<void(const json&, const std::string&)>& visit) {
  if (!j.is_object()) return;
  if (j.contains("value")) {
    visit(j, path);
    return;
  }
  for (const auto& [key, child] : j.items()) every_quantity(child, path + "/" + key, visit);
}

}  // namespace

TEST_CASE("soc profiles: every built-in profile loads and says where each number comes from", "[soc_profiles]") {
  REQUIRE_FALSE(kvbench::builtin_soc_profiles().empty());
  for (const auto& [name, text] : kvbench::builtin_soc_profiles()) {
    INFO(name);
    const kv::soc::SocProfile p = parse_soc_profile(text, name + ".json");
    CHECK(p.name == name);
    CHECK(p.engine(p.decode_engine).present);
    int numbers = 0;
    every_quantity(json::parse(text), "", [&](const json& q, const std::string& path) {
      INFO(path);
      ++numbers;
      const bool sourced = q.contains("source") && !q["source"].get<std::string>().empty();
      const bool derived = q.contains("derived") && !q["derived"].get<std::string>().empty();
      CHECK(sourced != derived);
    });
    CHECK(numbers >= 61);  // every field of the schema
    for (const kv::soc::EngineProfile& engine : p.engines) {
      if (!engine.present) continue;
      CHECK(engine.efficiency.value > 0.0);
      CHECK(engine.efficiency.value <= 1.0);
      CHECK(engine.peak_gmac_per_s.value > 0.0);
    }
  }
  // The shipped phones and boards; every one but the host cites at least some measured or
  // published figures directly, not only estimates.
  std::set<std::string> names;
  for (const auto& [name, text] : kvbench::builtin_soc_profiles()) {
    names.insert(name);
    if (name == "host") continue;
    int sourced = 0, estimates = 0;
    every_quantity(json::parse(text), "", [&](const json& q, const std::string&) {
      sourced += q.contains("source") ? 1 : 0;
      estimates += q.contains("derived") && q["derived"].get<std::string>().rfind("estimate", 0) == 0 ? 1 : 0;
    });
    INFO(name);
    CHECK(sourced >= 3);
    CHECK(estimates < 61);
  }
  CHECK(names == std::set<std::string>{"host", "snapdragon-8-gen-3", "dimensity-9300", "apple-a17-pro", "apple-m3", "raspberry-pi-5"});
}

TEST_CASE("soc profiles: a profile written back as JSON reads the same", "[soc_profiles]") {
  const kv::soc::SocProfile p = parse_soc_profile(host_text(), "host.json");
  const kv::soc::SocProfile again = parse_soc_profile(kvbench::soc_profile_json(p), "again.json");
  CHECK(again.name == p.name);
  CHECK(again.l1.read_gb_per_s.value == p.l1.read_gb_per_s.value);
  CHECK(again.l2.latency_us.derived == p.l2.latency_us.derived);
  CHECK(again.engine(kv::soc::EngineKind::Cpu).decode_gmac_per_s[4].value ==
        p.engine(kv::soc::EngineKind::Cpu).decode_gmac_per_s[4].value);
  CHECK(again.energy.pj_per_exp.value == p.energy.pj_per_exp.value);
  CHECK(kvbench::soc_profile_json(again) == kvbench::soc_profile_json(p));
}

TEST_CASE("soc profiles: malformed profiles are refused with the JSON path and the reason", "[soc_profiles]") {
  struct Bad {
    const char* what;
    std::function<void(json&)> mutate;
    std::string field, reason;
  };
  const std::vector<Bad> cases = {
      {"a missing field", [](json& j) { j["engines"]["cpu"].erase("exp_g_per_s"); }, "/engines/cpu/exp_g_per_s", "is required"},
      {"no source or derivation", [](json& j) { j["tiers"]["l1"]["read_gb_per_s"].erase("derived"); }, "/tiers/l1/read_gb_per_s",
       "no source or derivation"},
      {"both", [](json& j) { j["tiers"]["l1"]["read_gb_per_s"]["source"] = "a spec sheet"; }, "/tiers/l1/read_gb_per_s",
       "both a source and a derivation"},
      {"a non-positive bandwidth", [](json& j) { j["tiers"]["l2"]["write_gb_per_s"]["value"] = 0; },
       "/tiers/l2/write_gb_per_s/value", "must be positive"},
      {"a negative energy", [](json& j) { j["energy"]["pj_per_exp"]["value"] = -1; }, "/energy/pj_per_exp/value", "must be >= 0"},
      {"a wrong unit", [](json& j) { j["tiers"]["l1"]["read_gb_per_s"]["unit"] = "MB/s"; }, "/tiers/l1/read_gb_per_s/unit",
       "where this field is in 'GB/s'"},
      {"an unknown engine", [](json& j) { j["schedule"]["decode"] = "tpu"; }, "/schedule/decode", "unknown engine 'tpu'"},
      {"an engine not described", [](json& j) { j["schedule"]["prefill"] = "npu"; }, "/schedule/prefill", "not described"},
      {"an unknown field", [](json& j) { j["tiers"]["l1"]["colour"] = 1; }, "/tiers/l1/colour", "unknown field"},
      {"an unknown format", [](json& j) { j["engines"]["cpu"]["decode_gmac_per_s"]["q3"] = j["engines"]["cpu"]["exp_g_per_s"]; },
       "/engines/cpu/decode_gmac_per_s/q3", "unknown field"},
      {"a budget above the memory", [](json& j) { j["memory"]["model_budget_bytes"]["value"] = 1e18; }, "/memory/model_budget_bytes",
       "above the installed memory"},
      {"a bad name", [](json& j) { j["name"] = "Host Profile"; }, "/name", "lowercase"},
      {"an efficiency above 1", [](json& j) { j["engines"]["cpu"]["efficiency"]["value"] = 1.5; }, "/engines/cpu/efficiency/value",
       "above 1"},
      {"a rate above the peak", [](json& j) { j["engines"]["cpu"]["decode_gmac_per_s"]["q8"]["value"] = 1e9; },
       "/engines/cpu/decode_gmac_per_s/q8/value", "above the engine's peak_gmac_per_s"},
      {"a missing peak", [](json& j) { j["engines"]["cpu"].erase("peak_gmac_per_s"); }, "/engines/cpu/peak_gmac_per_s",
       "run kvbench calibrate again"},
      {"a missing wait behind writes", [](json& j) { j["tiers"]["l2"].erase("read_behind_write_us"); }, "/tiers/l2/read_behind_write_us",
       "run kvbench calibrate again"},
      {"a negative wait behind writes", [](json& j) { j["tiers"]["l2"]["read_behind_write_us"]["value"] = -1.0; },
       "/tiers/l2/read_behind_write_us/value", "must be >= 0"},
  };
  for (const Bad& bad : cases) {
    INFO(bad.what);
    const kv::InputError e = refusal(bad.mutate);
    CHECK(e.where() == "bad.json");
    CHECK(e.field() == bad.field);
    CHECK_THAT(e.reason(), Catch::Contains(bad.reason));
  }
  CHECK_THROWS_AS(parse_soc_profile("{\"name\": \"x\",", "cut.json"), kv::InputError);
}

TEST_CASE("soc profiles: a database's host profile beside it is used, the compiled-in one otherwise", "[soc_profiles]") {
  kvtest::TempDir dir("soc-profiles");
  const std::string db = dir.path + "/results.sqlite";
  CHECK(kvbench::host_profile_path(db) == dir.path + "/socs/host.json");
  CHECK(kvbench::host_profile_path("results.sqlite") == "./socs/host.json");
  const kv::soc::SocProfile builtin = kvbench::load_soc_profile("host", db);
  CHECK_THAT(builtin.origin, Catch::Contains("built in"));

  json j = json::parse(host_text());
  j["tiers"]["l1"]["read_gb_per_s"]["value"] = 123.0;
  std::filesystem::create_directories(dir.path + "/socs");
  std::ofstream(dir.path + "/socs/host.json") << j.dump();
  const kv::soc::SocProfile own = kvbench::load_soc_profile("host", db);
  CHECK(own.origin == dir.path + "/socs/host.json");
  CHECK(own.l1.read_gb_per_s.value == 123.0);
  CHECK(own.hash != builtin.hash);

  std::ofstream(dir.path + "/socs/host.json") << "{\"name\": \"host\"}";
  try {
    kvbench::load_soc_profile("host", db);
    FAIL("a malformed host profile was accepted");
  } catch (const kv::InputError& e) {
    CHECK(e.where() == dir.path + "/socs/host.json");
  }
  CHECK_THROWS_AS(kvbench::load_soc_profile("no-such-soc", db), kv::InputError);
}
