#include "soc_profiles.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "builtin_socs.h"
#include "quant/format.h"
#include "runtime/error.h"
#include "store_location.h"
#include "strict_json.h"

namespace kvbench {

namespace {

using json = nlohmann::json;
using namespace kv::soc;

enum class Bound : std::uint8_t { Positive, NonNegative };

// Walks one profile, reading each field into the struct and refusing what does not belong.
class ProfileReader {
 public:
  ProfileReader(const json& root, std::string file) : root_(root), file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& path, const std::string& reason) const {
    throw kv::InputError(file_, path.empty() ? "/" : path, reason);
  }

  const json& object(const json& parent, const std::string& path, const std::string& key, std::set<std::string>& seen) {
    seen.insert(key);
    if (!parent.contains(key)) fail(path + "/" + key, "is required");
    const json& child = parent.at(key);
    if (!child.is_object()) fail(path + "/" + key, "must be an object");
    return child;
  }

  void no_unknown(const json& object, const std::string& path, const std::set<std::string>& known) const {
    for (const auto& [key, value] : object.items()) {
      if (known.count(key) == 0) {
        std::string list;
        for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
        fail(path + "/" + key, "unknown field (expected one of: " + list + ")");
      }
    }
  }

  Quantity quantity(const json& parent, const std::string& path, const std::string& key, const std::string& unit,
                    std::set<std::string>& seen, Bound bound = Bound::Positive) {
    const std::string at = path + "/" + key;
    std::set<std::string> own;
    const json& q = object(parent, path, key, seen);
    Quantity out;
    own.insert("value");
    if (!q.contains("value") || !q.at("value").is_number()) fail(at + "/value", "is required and must be a number");
    out.value = q.at("value").get<double>();
    if (!std::isfinite(out.value)) fail(at + "/value", "must be finite");
    if (bound == Bound::Positive && !(out.value > 0.0)) fail(at + "/value", fmt::format("{} must be positive", out.value));
    if (bound == Bound::NonNegative && out.value < 0.0) fail(at + "/value", fmt::format("{} must be >= 0", out.value));
    own.insert("unit");
    if (!q.contains("unit") || !q.at("unit").is_string()) fail(at + "/unit", "is required and must be a string");
    out.unit = q.at("unit").get<std::string>();
    if (out.unit != unit) fail(at + "/unit", "'" + out.unit + "' where this field is in '" + unit + "'");
    own.insert("source");
    own.insert("derived");
    const auto text = [&](const char* name, std::string& into) {
      if (!q.contains(name)) return;
      if (!q.at(name).is_string() || q.at(name).get<std::string>().empty()) fail(at + "/" + name, "must be a non-empty string");
      into = q.at(name).get<std::string>();
    };
    text("source", out.source);
    text("derived", out.derived);
    if (out.source.empty() && out.derived.empty()) fail(at, "has no source or derivation: every number says where it comes from");
    if (!out.source.empty() && !out.derived.empty()) fail(at, "has both a source and a derivation: give one");
    no_unknown(q, at, own);
    return out;
  }

  template <std::size_t N>
  void quantities(const json& parent, const std::string& path, const std::string& key, const std::string& unit,
                  std::set<std::string>& seen, const std::array<std::string, N>& names, std::array<Quantity, N>& into,
                  Bound bound = Bound::Positive) {
    const json& o = object(parent, path, key, seen);
    std::set<std::string> own;
    for (std::size_t i = 0; i < N; ++i) into[i] = quantity(o, path + "/" + key, names[i], unit, own, bound);
    no_unknown(o, path + "/" + key, own);
  }

  void tier(const json& tiers, const std::string& path, const std::string& key, std::set<std::string>& seen, TierProfile& t,
            std::set<std::string>& own, const json*& body) {
    const json& o = object(tiers, path, key, seen);
    body = &o;
    const std::string at = path + "/" + key;
    t.capacity_bytes = quantity(o, at, "capacity_bytes", "bytes", own);
    t.read_gb_per_s = quantity(o, at, "read_gb_per_s", "GB/s", own);
    t.write_gb_per_s = quantity(o, at, "write_gb_per_s", "GB/s", own);
    t.latency_us = quantity(o, at, "latency_us", "us", own);
  }

  SocProfile read() {
    SocProfile p;
    if (!root_.is_object()) fail("", "a profile must be a JSON object");
    std::set<std::string> top;
    const auto string_field = [&](const char* key, std::string& into, bool required) {
      top.insert(key);
      if (!root_.contains(key)) {
        if (required) fail(std::string("/") + key, "is required");
        return;
      }
      if (!root_.at(key).is_string()) fail(std::string("/") + key, "must be a string");
      into = root_.at(key).get<std::string>();
    };
    string_field("name", p.name, true);
    if (p.name.empty() || p.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos) {
      fail("/name", "'" + p.name + "' must be lowercase letters, digits and dashes");
    }
    string_field("description", p.description, true);

    std::set<std::string> own;
    const json& memory = object(root_, "", "memory", top);
    p.memory_capacity_bytes = quantity(memory, "/memory", "capacity_bytes", "bytes", own);
    p.model_budget_bytes = quantity(memory, "/memory", "model_budget_bytes", "bytes", own);
    p.runtime_reserve_bytes = quantity(memory, "/memory", "runtime_reserve_bytes", "bytes", own, Bound::NonNegative);
    no_unknown(memory, "/memory", own);
    if (p.model_budget_bytes.value > p.memory_capacity_bytes.value) {
      fail("/memory/model_budget_bytes", "is above the installed memory (capacity_bytes)");
    }

    const json& tiers = object(root_, "", "tiers", top);
    std::set<std::string> tier_keys;
    for (const char* key : {"l0", "l1"}) {
      std::set<std::string> fields;
      const json* body = nullptr;
      tier(tiers, "/tiers", key, tier_keys, key[1] == '0' ? p.l0 : p.l1, fields, body);
      no_unknown(*body, std::string("/tiers/") + key, fields);
    }
    {
      std::set<std::string> fields;
      const json* body = nullptr;
      tier(tiers, "/tiers", "l2", tier_keys, p.l2, fields, body);
      p.l2.queue_depth = quantity(*body, "/tiers/l2", "queue_depth", "requests", fields);
      p.l2.random_read_4k_iops = quantity(*body, "/tiers/l2", "random_read_4k_iops", "IOPS", fields);
      p.l2.random_read_page_gb_per_s = quantity(*body, "/tiers/l2", "random_read_page_gb_per_s", "GB/s", fields);
      if (!body->contains("read_behind_write_us")) {
        fail("/tiers/l2/read_behind_write_us", "is required: what a page read waits longer while the device writes (a host profile written "
                                               "by an older kvbench calibrate lacks it: run kvbench calibrate again)");
      }
      p.l2.read_behind_write_us = quantity(*body, "/tiers/l2", "read_behind_write_us", "us", fields, Bound::NonNegative);
      no_unknown(*body, "/tiers/l2", fields);
    }
    no_unknown(tiers, "/tiers", tier_keys);

    std::array<std::string, kFormats> formats;
    for (kv::Format f : kv::kAllFormats) formats[static_cast<int>(f)] = std::string(kv::format_name(f));
    std::array<std::string, kWeightFormatCount> weights;
    for (int i = 0; i < kWeightFormatCount; ++i) weights[static_cast<std::size_t>(i)] = kWeightFormatNames[i];

    top.insert("engines");
    if (!root_.contains("engines") || !root_.at("engines").is_object() || root_.at("engines").empty()) {
      fail("/engines", "is required: an object with at least one of cpu, gpu, npu");
    }
    const json& engines = root_.at("engines");
    std::set<std::string> engine_keys;
    for (int e = 0; e < kEngineCount; ++e) {
      const std::string key = kEngineNames[e];
      if (!engines.contains(key)) continue;
      const json& o = object(engines, "/engines", key, engine_keys);
      const std::string at = "/engines/" + key;
      EngineProfile& engine = p.engines[static_cast<std::size_t>(e)];
      engine.present = true;
      std::set<std::string> fields;
      quantities(o, at, "decode_gmac_per_s", "GMAC/s", fields, formats, engine.decode_gmac_per_s);
      quantities(o, at, "prefill_gmac_per_s", "GMAC/s", fields, formats, engine.prefill_gmac_per_s);
      quantities(o, at, "quantize_gvalue_per_s", "Gvalue/s", fields, formats, engine.quantize_gvalue_per_s);
      engine.quest_bounds_gproduct_per_s = quantity(o, at, "quest_bounds_gproduct_per_s", "Gproduct/s", fields);
      engine.exp_g_per_s = quantity(o, at, "exp_g_per_s", "Gexp/s", fields);
      quantities(o, at, "dense_gmac_per_s", "GMAC/s", fields, weights, engine.dense_gmac_per_s);
      quantities(o, at, "dense_decode_gmac_per_s", "GMAC/s", fields, weights, engine.dense_decode_gmac_per_s);
      engine.attention_call_us = quantity(o, at, "attention_call_us", "us", fields, Bound::NonNegative);
      engine.context_page_ns = quantity(o, at, "context_page_ns", "ns", fields, Bound::NonNegative);
      engine.managed_page_ns = quantity(o, at, "managed_page_ns", "ns", fields, Bound::NonNegative);
      engine.l2_page_us = quantity(o, at, "l2_page_us", "us", fields, Bound::NonNegative);
      engine.select_call_us = quantity(o, at, "select_call_us", "us", fields, Bound::NonNegative);
      for (const char* key : {"peak_gmac_per_s", "efficiency"}) {
        if (!o.contains(key)) {
          fail(at + "/" + key, "is required: every engine states its peak and the share of it sustained (a host profile written by an "
                               "older kvbench calibrate lacks them: run kvbench calibrate again)");
        }
      }
      engine.peak_gmac_per_s = quantity(o, at, "peak_gmac_per_s", "GMAC/s", fields);
      engine.efficiency = quantity(o, at, "efficiency", "ratio", fields);
      if (engine.efficiency.value > 1.0) fail(at + "/efficiency/value", fmt::format("{} is above 1: no engine sustains more than its peak", engine.efficiency.value));
      no_unknown(o, at, fields);
      // A sustained multiply-add rate above the engine's peak is a typo or a unit slip.
      const auto at_most_peak = [&](const char* key, const auto& rates, const auto& names) {
        for (std::size_t i = 0; i < rates.size(); ++i) {
          if (rates[i].value > engine.peak_gmac_per_s.value * (1.0 + 1e-9)) {
            fail(at + "/" + key + "/" + names[i] + "/value",
                 fmt::format("{} GMAC/s is above the engine's peak_gmac_per_s ({})", rates[i].value, engine.peak_gmac_per_s.value));
          }
        }
      };
      at_most_peak("decode_gmac_per_s", engine.decode_gmac_per_s, formats);
      at_most_peak("prefill_gmac_per_s", engine.prefill_gmac_per_s, formats);
      at_most_peak("dense_gmac_per_s", engine.dense_gmac_per_s, weights);
      at_most_peak("dense_decode_gmac_per_s", engine.dense_decode_gmac_per_s, weights);
    }
    no_unknown(engines, "/engines", {"cpu", "gpu", "npu"});

    std::set<std::string> schedule_keys;
    const json& schedule = object(root_, "", "schedule", top);
    const auto engine_of = [&](const char* key) {
      schedule_keys.insert(key);
      const std::string at = std::string("/schedule/") + key;
      if (!schedule.contains(key) || !schedule.at(key).is_string()) fail(at, "is required: cpu, gpu or npu");
      const std::string name = schedule.at(key).get<std::string>();
      for (int e = 0; e < kEngineCount; ++e) {
        if (name == kEngineNames[e]) {
          if (!p.engines[static_cast<std::size_t>(e)].present) fail(at, "'" + name + "' is not described under /engines");
          return static_cast<EngineKind>(e);
        }
      }
      fail(at, "unknown engine '" + name + "' (cpu, gpu or npu)");
    };
    p.prefill_engine = engine_of("prefill");
    p.decode_engine = engine_of("decode");
    schedule_keys.insert("transfers_overlap_compute");
    if (!schedule.contains("transfers_overlap_compute") || !schedule.at("transfers_overlap_compute").is_boolean()) {
      fail("/schedule/transfers_overlap_compute", "is required and must be true or false");
    }
    p.transfers_overlap_compute = schedule.at("transfers_overlap_compute").get<bool>();
    no_unknown(schedule, "/schedule", schedule_keys);

    std::set<std::string> energy_keys;
    const json& energy = object(root_, "", "energy", top);
    quantities(energy, "/energy", "pj_per_byte", "pJ/byte", energy_keys, std::array<std::string, 3>{"l0", "l1", "l2"},
               p.energy.pj_per_byte, Bound::NonNegative);
    quantities(energy, "/energy", "pj_per_mac", "pJ/MAC", energy_keys, weights, p.energy.pj_per_mac, Bound::NonNegative);
    p.energy.pj_per_exp = quantity(energy, "/energy", "pj_per_exp", "pJ", energy_keys, Bound::NonNegative);
    no_unknown(energy, "/energy", energy_keys);

    no_unknown(root_, "", top);
    return p;
  }

 private:
  const json& root_;
  std::string file_;
};

json quantity_json(const Quantity& q) {
  json out = {{"value", q.value}, {"unit", q.unit}};
  if (!q.source.empty()) out["source"] = q.source;
  if (!q.derived.empty()) out["derived"] = q.derived;
  return out;
}

template <std::size_t N>
json quantities_json(const std::array<Quantity, N>& values, const std::array<std::string, N>& names) {
  json out = json::object();
  for (std::size_t i = 0; i < N; ++i) out[names[i]] = quantity_json(values[i]);
  return out;
}

std::string hash_text(const std::string& text) { return fmt::format("{:016x}", XXH3_64bits(text.data(), text.size())); }

}  // namespace

const std::vector<std::pair<std::string, std::string>>& builtin_soc_profiles() { return builtin_socs(); }

std::string builtin_soc_names(bool with_host) {
  std::string names;
  for (const auto& [name, text] : builtin_socs()) {
    if (with_host || name != "host") names += (names.empty() ? "" : ", ") + name;
  }
  return names;
}

bool is_builtin_soc(const std::string& name) {
  for (const auto& [n, text] : builtin_socs()) {
    if (n == name) return true;
  }
  return false;
}

SocProfile parse_soc_profile(const std::string& text, const std::string& file) {
  const json root = parse_strict(text, file);
  SocProfile profile = ProfileReader(root, file).read();
  profile.origin = file;
  profile.hash = hash_text(text);
  return profile;
}

std::string host_profile_path(const std::string& db_path) {
  return (store_local_dir(db_path) / "socs" / "host.json").string();
}

SocProfile load_soc_profile(const std::string& name, const std::string& db_path) {
  if (name == "host" && !db_path.empty()) {
    const std::string path = host_profile_path(db_path);
    std::error_code ec;
    if (std::filesystem::exists(path, ec)) {
      std::ifstream in(path, std::ios::binary);
      std::stringstream text;
      text << in.rdbuf();
      if (!in && !in.eof()) throw kv::InputError(path, "/", "cannot be read");
      SocProfile profile = parse_soc_profile(text.str(), path);
      if (profile.name != "host") throw kv::InputError(path, "/name", "'" + profile.name + "' where the host profile is named 'host'");
      return profile;
    }
  }
  for (const auto& [n, text] : builtin_socs()) {
    if (n == name) {
      SocProfile profile = parse_soc_profile(text, "configs/socs/" + n + ".json (built in)");
      return profile;
    }
  }
  std::string names;
  for (const auto& [n, text] : builtin_socs()) names += (names.empty() ? "" : ", ") + n;
  throw kv::InputError("--soc", name, "unknown SoC profile (profiles: " + names + ")");
}

std::string soc_profile_json(const SocProfile& p) {
  std::array<std::string, kFormats> formats;
  for (kv::Format f : kv::kAllFormats) formats[static_cast<int>(f)] = std::string(kv::format_name(f));
  std::array<std::string, kWeightFormatCount> weights;
  for (int i = 0; i < kWeightFormatCount; ++i) weights[static_cast<std::size_t>(i)] = kWeightFormatNames[i];
  const auto tier = [](const TierProfile& t) {
    return json{{"capacity_bytes", quantity_json(t.capacity_bytes)},
                {"read_gb_per_s", quantity_json(t.read_gb_per_s)},
                {"write_gb_per_s", quantity_json(t.write_gb_per_s)},
                {"latency_us", quantity_json(t.latency_us)}};
  };
  json l2 = tier(p.l2);
  l2["queue_depth"] = quantity_json(p.l2.queue_depth);
  l2["random_read_4k_iops"] = quantity_json(p.l2.random_read_4k_iops);
  l2["random_read_page_gb_per_s"] = quantity_json(p.l2.random_read_page_gb_per_s);
  l2["read_behind_write_us"] = quantity_json(p.l2.read_behind_write_us);
  json engines = json::object();
  for (int e = 0; e < kEngineCount; ++e) {
    const EngineProfile& engine = p.engines[static_cast<std::size_t>(e)];
    if (!engine.present) continue;
    engines[kEngineNames[e]] = {{"decode_gmac_per_s", quantities_json(engine.decode_gmac_per_s, formats)},
                                {"prefill_gmac_per_s", quantities_json(engine.prefill_gmac_per_s, formats)},
                                {"quantize_gvalue_per_s", quantities_json(engine.quantize_gvalue_per_s, formats)},
                                {"quest_bounds_gproduct_per_s", quantity_json(engine.quest_bounds_gproduct_per_s)},
                                {"exp_g_per_s", quantity_json(engine.exp_g_per_s)},
                                {"dense_gmac_per_s", quantities_json(engine.dense_gmac_per_s, weights)},
                                {"dense_decode_gmac_per_s", quantities_json(engine.dense_decode_gmac_per_s, weights)},
                                {"attention_call_us", quantity_json(engine.attention_call_us)},
                                {"context_page_ns", quantity_json(engine.context_page_ns)},
                                {"managed_page_ns", quantity_json(engine.managed_page_ns)},
                                {"l2_page_us", quantity_json(engine.l2_page_us)},
                                {"select_call_us", quantity_json(engine.select_call_us)},
                                {"peak_gmac_per_s", quantity_json(engine.peak_gmac_per_s)},
                                {"efficiency", quantity_json(engine.efficiency)}};
  }
  const json root = {
      {"name", p.name},
      {"description", p.description},
      {"memory",
       {{"capacity_bytes", quantity_json(p.memory_capacity_bytes)},
        {"model_budget_bytes", quantity_json(p.model_budget_bytes)},
        {"runtime_reserve_bytes", quantity_json(p.runtime_reserve_bytes)}}},
      {"tiers", {{"l0", tier(p.l0)}, {"l1", tier(p.l1)}, {"l2", l2}}},
      {"engines", engines},
      {"schedule",
       {{"prefill", kEngineNames[static_cast<int>(p.prefill_engine)]},
        {"decode", kEngineNames[static_cast<int>(p.decode_engine)]},
        {"transfers_overlap_compute", p.transfers_overlap_compute}}},
      {"energy",
       {{"pj_per_byte", quantities_json(p.energy.pj_per_byte, std::array<std::string, 3>{"l0", "l1", "l2"})},
        {"pj_per_mac", quantities_json(p.energy.pj_per_mac, weights)},
        {"pj_per_exp", quantity_json(p.energy.pj_per_exp)}}}};
  return root.dump(2) + "\n";
}

}  // namespace kvbench
