#include "suite_config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <iterator>
#include <set>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "benchmark_definition.h"
#include "model/synthetic_presets.h"
#include "model_loader.h"
#include "runtime/error.h"
#include "runtime/thread_limit.h"
#include "soc_profiles.h"
#include "human_units.h"
#include "strict_json.h"
#include "json_fields.h"
#include "synthetic_block.h"

namespace kvbench {

std::string name_problem(const std::string& name, bool tag) {
  if (name.empty()) return "must not be empty";
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) return "must be printable: no control characters or line breaks (" + nlohmann::json(name).dump() + ")";
    if (c == '/' && !tag) return "must not contain '/': it separates a case's parts (" + nlohmann::json(name).dump() + ")";
    if (c == ',' && tag) return "must not contain ',': stored tags are separated by commas (" + nlohmann::json(name).dump() + ")";
  }
  return "";
}

using json = nlohmann::json;
using json_fields::fail;
using json_fields::Fields;
using json_fields::rethrow_at;
using json_fields::shortest;

std::string weight_precision_name(const kv::SyntheticPreset& preset) {
  return preset.weight_bits <= 4 ? "q4" : preset.weight_bits <= 8 ? "q8" : "f16";
}

kv::SyntheticPreset with_weights(kv::SyntheticPreset preset, const std::string& weights) {
  if (weights.empty() || weights == weight_precision_name(preset)) return preset;
  preset.weight_bits = weights == "q4" ? 4 : weights == "q8" ? 8 : 16;
  preset.weight_group = weights == "f16" ? 0 : 128;
  return preset;
}

namespace {


void read_sparse(Fields& f, kv::SparsePolicy& s, const std::string& file) {
  const std::string selector = f.string("selector", "full");
  rethrow_at(file, f.path(), [&] { s.selector = kv::parse_selector(selector, "selector"); });
  s.sinks = static_cast<int>(f.integer("sinks", s.sinks, 0, 1 << 24));
  s.window = static_cast<int>(f.integer("window", s.window, 0, 1 << 24));
  s.budget = static_cast<float>(f.number("budget", s.budget));
  // Written as 0 is not the same as absent: say what is wrong with the value given.
  if (f.has("budget") && !(s.budget > 0.0f && s.budget <= 1.0f)) fail(file, f.at("budget"), fmt::format("must be in (0, 1] ({})", f.number("budget", 0.0)));
  s.budget_pages = static_cast<int>(f.integer("budget_pages", s.budget_pages, 0, 1 << 24));
  if (f.has("budget_pages") && s.budget_pages < 1) fail(file, f.at("budget_pages"), fmt::format("must be >= 1 ({})", s.budget_pages));
  s.allow_pinned_only = f.boolean("allow_pinned_only", s.allow_pinned_only);
  s.alpha = static_cast<float>(f.number("alpha", s.alpha));
  s.beta = static_cast<float>(f.number("beta", s.beta));
  s.gamma = static_cast<float>(f.number("gamma", s.gamma));
  s.decay = static_cast<float>(f.number("decay", s.decay));
  const std::string compensation = f.string("compensation", "none");
  if (compensation == "none") {
    s.compensation = kv::Compensation::None;
  } else if (compensation == "mean_v") {
    s.compensation = kv::Compensation::MeanV;
  } else {
    fail(file, f.at("compensation"), "'" + compensation + "' is not one of none, mean_v");
  }
  s.sparse_prefill = f.boolean("sparse_prefill", s.sparse_prefill);
  s.sample_every = static_cast<int>(f.integer("sample_every", s.sample_every, 1, 1 << 20));
  s.top_m = static_cast<int>(f.integer("top_m", s.top_m, 1, 1 << 20));
  f.done();
  rethrow_at(file, f.path(), [&] { kv::validate_sparse_policy(s, "sparse"); });
}

// The policy's visual block: each image's pages selected apart from the text
// (sparse/visual_budget.h), stored in K/V formats and a V group of their own where it names any
// (unnamed ones are the policy's), in L1 or L2 (`tier`; l2 needs an L1 cap, checked once the
// memory block is read).
void read_visual(Fields& f, PolicyConfig& p, const std::string& file) {
  kv::SparsePolicy& s = p.sparse;
  kv::VisualPages& format = p.cache.visual;
  const std::string tier = f.string("tier", "l1");
  if (tier != "l1" && tier != "l2") fail(file, f.at("tier"), "'" + tier + "' is not a tier of image pages (l1 or l2)");
  format.tier = tier == "l2" ? kv::VisualTier::L2 : kv::VisualTier::L1;
  format.own = f.has("k_format") || f.has("v_format") || f.has("v_group");
  if (format.own) {
    const std::string k = f.string("k_format", std::string(kv::format_name(p.cache.k_format)));
    const std::string v = f.string("v_format", std::string(kv::format_name(p.cache.v_format)));
    rethrow_at(file, f.path(), [&] {
      format.k_format = kv::parse_format(k, "visual", "k_format");
      format.v_format = kv::parse_format(v, "visual", "v_format");
    });
    format.v_group = static_cast<int>(f.integer("v_group", p.cache.v_group, 8, 512));
    if (format.v_group % 8 != 0) fail(file, f.at("v_group"), "must be a multiple of 8 (and divide each model's head_dim)");
  }
  if (!f.has("budget")) fail(file, f.at("budget"), "is required: the fraction of each image's pages a decode step keeps");
  s.visual.budget = static_cast<float>(f.number("budget", 0.0));
  if (!(s.visual.budget > 0.0f && s.visual.budget <= 1.0f)) fail(file, f.at("budget"), fmt::format("must be in (0, 1] ({})", f.number("budget", 0.0)));
  s.visual.min_pages_per_image = static_cast<int>(f.integer("min_pages_per_image", 1, 1, 1 << 20));
  f.done();
  if (s.selector == kv::Selector::Full) {
    fail(file, f.at("budget"), "the policy's sparse selector is full (it keeps every page): a visual budget needs a sparse selector");
  }
  rethrow_at(file, f.path(), [&] { kv::validate_visual_budget(s.visual, "visual"); });
}

void read_memory(Fields& f, kv::MemoryConfig& m, const std::string& base_dir, const std::string& file) {
  m.l0_bytes = f.size("l0_bytes", m.l0_bytes);
  m.l0_copy = f.boolean("l0_copy", m.l0_copy);
  m.l1_bytes = f.size("l1_bytes", m.l1_bytes);
  m.l2.dir = f.string("l2_dir", "");
  if (!m.l2.dir.empty() && m.l2.dir.front() != '/') m.l2.dir = base_dir + "/" + m.l2.dir;
  m.l2.segment_bytes = f.size("l2_segment_bytes", m.l2.segment_bytes);
  m.l2.batch_bytes = f.size("l2_batch_bytes", m.l2.batch_bytes);
  m.l2.max_bytes = f.size("l2_max_bytes", m.l2.max_bytes);
  m.l2.overprovision = f.number("l2_overprovision", m.l2.overprovision);
  m.l2.direct_io = f.boolean("l2_direct_io", m.l2.direct_io);
  m.l2.queue_depth = static_cast<int>(f.integer("l2_queue_depth", m.l2.queue_depth, 1, 64));
  m.l2.max_read_bytes = f.size("l2_max_read_bytes", m.l2.max_read_bytes);
  m.prefetch_lookahead = static_cast<int>(f.integer("prefetch_lookahead", m.prefetch_lookahead, 0, 64));
  m.warning_free = f.number("warning_free", m.warning_free);
  m.target_free = f.number("target_free", m.target_free);
  m.danger_pinned = f.number("danger_pinned", m.danger_pinned);
  m.demote_batch_pages = static_cast<std::size_t>(f.integer("demote_batch_pages", 64, 1, 1 << 20));
  m.mem_available_floor_bytes = f.size("mem_available_floor_bytes", m.mem_available_floor_bytes);
  m.importance_decay = static_cast<float>(f.number("importance_decay", m.importance_decay));
  m.selection_shift = f.number("selection_shift", m.selection_shift);
  f.done();
  if (m.l1_bytes > 0 && m.l0_bytes > m.l1_bytes) {
    // Blame the field the user wrote: an L1 cap below the default L0 arena is the L1's fault.
    const std::string l0 = human_bytes(static_cast<double>(m.l0_bytes)), l1 = human_bytes(static_cast<double>(m.l1_bytes));
    if (f.has("l0_bytes")) fail(file, f.at("l0_bytes"), "L0 is larger than L1 (" + l0 + " > l1_bytes " + l1 + ")");
    fail(file, f.at("l1_bytes"), "L1 is smaller than the L0 arena (" + l1 + " < the default l0_bytes " + l0 + "; set l0_bytes too)");
  }
  // An empty l2_dir is checked by the runner, which puts it beside the database.
  kv::MemoryConfig check = m;
  check.l2.dir.clear();
  rethrow_at(file, f.path(), [&] { kv::validate_memory_config(check); });
  kv::L2Config l2 = m.l2;
  if (l2.dir.empty()) l2.dir = "(the runner's)";  // the other fields are checked before any run
  rethrow_at(file, f.path(), [&] { kv::validate_l2_config(l2); });
}

// A "models" list of a workload or policy: names of the suite's models it runs on.
std::vector<std::string> read_model_names(const json& names, const std::string& at, const std::string& file) {
  if (!names.is_array() || names.empty()) fail(file, at, "must be a non-empty array of model names");
  std::vector<std::string> out;
  for (std::size_t n = 0; n < names.size(); ++n) {
    if (!names[n].is_string()) fail(file, at + "/" + std::to_string(n), "must be a model name (a string)");
    out.push_back(names[n].get<std::string>());
  }
  return out;
}

void check_model_names(const std::vector<std::string>& names, const std::vector<ModelConfig>& models, const std::string& at,
                       const std::string& file) {
  for (std::size_t n = 0; n < names.size(); ++n) {
    const bool known = std::any_of(models.begin(), models.end(), [&](const ModelConfig& m) { return m.name == names[n]; });
    if (!known) fail(file, at + "/" + std::to_string(n), "'" + names[n] + "' is not a model of this suite");
  }
}

PolicyConfig read_policy(const json& j, const std::string& path, const std::string& file, const std::string& base_dir) {
  Fields f(j, path, file);
  PolicyConfig p;
  p.name = f.name("name");
  const std::string k = f.string("k", "f16"), v = f.string("v", "f16");
  rethrow_at(file, path, [&] {
    p.cache.k_format = kv::parse_format(k, "policy", "k");
    p.cache.v_format = kv::parse_format(v, "policy", "v");
  });
  p.cache.v_group = static_cast<int>(f.integer("v_group", p.cache.v_group, 8, 512));
  if (p.cache.v_group % 8 != 0) fail(file, f.at("v_group"), "must be a multiple of 8 (and divide each model's head_dim)");
  p.cache.page_tokens = static_cast<int>(f.integer("page_tokens", p.cache.page_tokens, kv::kMinPageTokens, kv::kMaxPageTokens));
  p.cache.residual_tokens = static_cast<int>(f.integer("residual_tokens", p.cache.residual_tokens, 0, 1 << 24));
  p.cache.pad_pages_to_4k = f.boolean("pad_pages_to_4k", p.cache.pad_pages_to_4k);
  p.cache.threads = static_cast<int>(f.integer("threads", p.cache.threads, 0, kv::kMaxThreadsEver));
  if (const std::string problem = kv::thread_count_problem(p.cache.threads); !problem.empty()) fail(file, f.at("threads"), problem);
  const std::string isa = f.string("isa", "auto");
  rethrow_at(file, path, [&] { p.cache.isa = kv::parse_isa(isa, "isa"); });
  p.cache.split_pages = static_cast<int>(f.integer("split_pages", p.cache.split_pages, 1, 1 << 16));
  p.cache.prefix_cache = f.boolean("prefix_cache", p.cache.prefix_cache);
  p.cache.prefix_cache_bytes = f.size("prefix_cache_bytes", 0);
  if (p.cache.prefix_cache_bytes > 0 && !p.cache.prefix_cache) fail(file, f.at("prefix_cache_bytes"), "needs prefix_cache: true");
  p.test_slowdown = f.number("test_slowdown", 0.0);
  if (const json* list = f.child("models"); list != nullptr) p.models = read_model_names(*list, f.at("models"), file);
  if (!(p.test_slowdown >= 0.0 && p.test_slowdown <= 100.0)) fail(file, f.at("test_slowdown"), "must be in [0, 100]");
  p.cache.test_repeat_attention = f.number("test_repeat_attention", 0.0);
  if (!(p.cache.test_repeat_attention >= 0.0 && p.cache.test_repeat_attention <= 100.0)) {
    fail(file, f.at("test_repeat_attention"), "must be in [0, 100]");
  }
  if (const json* sparse = f.child("sparse")) {
    Fields s(*sparse, f.at("sparse"), file);
    read_sparse(s, p.sparse, file);
  }
  if (const json* visual = f.child("visual")) {
    Fields v(*visual, f.at("visual"), file);
    read_visual(v, p, file);
  }
  // Sinks and window stay in L1 whatever the tiers do.
  p.cache.memory.pin_sink_tokens = p.sparse.sinks;
  p.cache.memory.pin_window_tokens = p.sparse.window;
  if (const json* memory = f.child("memory")) {
    Fields m(*memory, f.at("memory"), file);
    read_memory(m, p.cache.memory, base_dir, file);
  }
  if (p.cache.visual.tier == kv::VisualTier::L2 && p.cache.memory.l1_bytes == 0) {
    fail(file, f.at("visual") + "/tier", "l2 needs an L1 cap (memory.l1_bytes): without one the policy has no L2 tier");
  }
  if (const json* speculative = f.child("speculative")) {
    Fields s(*speculative, f.at("speculative"), file);
    SpeculativeConfig& spec = p.speculative;
    spec.enabled = true;
    spec.draft = s.string("draft", spec.draft);
    spec.draft_layers = parse_draft_layers(spec.draft);
    if (spec.draft_layers < 0) {
      bool preset = false;
      for (const kv::SyntheticPreset& known : kv::synthetic_presets()) preset = preset || known.name == spec.draft;
      if (!preset) {
        fail(file, s.at("draft"),
             "'" + spec.draft + "' is not a draft kvbench runs: \"kv\" (the same model over its own copy of the context in "
             "draft_k_format/draft_v_format), \"layers:N\" (the model's first N layers and its output head, N >= 1; llama "
             "backend) or a synthetic preset's name (synthetic backend)");
      }
      spec.draft_layers = 0;
      spec.draft_preset = spec.draft;
    }
    spec.k = static_cast<int>(s.integer("k", spec.k, 1, kv::kMaxVerifyQueries - 1));
    if (spec.draft_layers > 0) {
      for (const char* field : {"draft_k_format", "draft_v_format"}) {
        if (s.has(field)) {
          fail(file, s.at(field), "a layers:N draft has no KV copy of its own (it writes the target's pages): the field would do nothing");
        }
      }
    }
    const std::string dk = s.string("draft_k_format", "q2"), dv = s.string("draft_v_format", "q2");
    rethrow_at(file, s.path(), [&] {
      spec.draft_k_format = kv::parse_format(dk, "speculative", "draft_k_format");
      spec.draft_v_format = kv::parse_format(dv, "speculative", "draft_v_format");
    });
    spec.accept_rate = s.number("accept_rate", spec.accept_rate);
    if (!(spec.accept_rate >= 0.0 && spec.accept_rate <= 1.0)) fail(file, s.at("accept_rate"), "must be in [0, 1]");
    s.done();
    // The verify step attends every page of its k + 1 queries; the sparse decoder selects for
    // one query at a time.
    if (p.sparse.selector != kv::Selector::Full) {
      fail(file, f.at("speculative"), "needs sparse selector \"full\": a verify step attends every page for its k + 1 queries");
    }
    if (p.cache.prefix_cache) fail(file, f.at("speculative"), "cannot be combined with prefix_cache yet (the draft's copy of the context would miss the shared pages)");
  }
  f.done();
  return p;
}

const json& array_field(const json& root, const std::string& key, const std::string& file) {
  if (!root.contains(key)) fail(file, "/" + key, "is required");
  const json& a = root.at(key);
  if (!a.is_array() || a.empty()) fail(file, "/" + key, "must be a non-empty array");
  return a;
}

}  // namespace

std::uint64_t parse_size(const std::string& text, const std::string& file, const std::string& path) {
  std::size_t used = 0;
  double value = 0.0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    fail(file, path, "'" + text + "' is not a size (a number and a unit: B, KiB, MiB, GiB, KB, MB, GB)");
  }
  std::string unit = text.substr(used);
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  double scale = 0.0;
  if (unit.empty() || unit == "B") scale = 1.0;
  if (unit == "KiB") scale = 1024.0;
  if (unit == "MiB") scale = 1024.0 * 1024.0;
  if (unit == "GiB") scale = 1024.0 * 1024.0 * 1024.0;
  if (unit == "KB") scale = 1e3;
  if (unit == "MB") scale = 1e6;
  if (unit == "GB") scale = 1e9;
  if (scale == 0.0) fail(file, path, "'" + unit + "' is not a unit (B, KiB, MiB, GiB, KB, MB, GB)");
  const double bytes = value * scale;
  if (!(bytes >= 0.0) || bytes > 1e18 || bytes != std::floor(bytes)) fail(file, path, "'" + text + "' is not a whole, non-negative byte count");
  return static_cast<std::uint64_t>(bytes);
}

namespace {

ModelConfig read_model(const json& node, std::size_t i, const std::string& file) {
  Fields m(node, "/models/" + std::to_string(i), file);
  ModelConfig model;
  model.name = m.name("name");
  model.backend = m.string("backend", "", true);
  if (model.backend == "synthetic") {
    model.preset = m.string("preset", "", true);
    rethrow_at(file, m.path(), [&] { kv::find_synthetic_preset(model.preset, "preset"); });
    model.sample_layers = static_cast<int>(m.integer("sample_layers", model.sample_layers, 1, 1024));
    model.weights = m.string("weights", weight_precision_name(kv::find_synthetic_preset(model.preset, "preset")));
    if (model.weights != "f16" && model.weights != "q8" && model.weights != "q4") {
      fail(file, m.at("weights"), "'" + model.weights + "' is not one of f16, q8, q4");
    }
    model.synthetic = parse_synthetic_block(m.child("synthetic"), m.at("synthetic"), file,
                                            kv::find_synthetic_preset(model.preset, "preset"));
  } else if (model.backend == "llama") {
    model.path = m.string("path", "", true);
    model.tokenizer = m.string("tokenizer", "", true);
    model.fetched = m.boolean("fetched", false);
  } else {
    fail(file, m.at("backend"), "'" + model.backend + "' is not one of synthetic, llama");
  }
  m.done();
  return model;
}

WorkloadConfig read_workload(const json& node, std::size_t i, const std::string& file, const std::vector<ModelConfig>& models) {
  static const std::set<std::string> kinds(std::begin(kWorkloadKinds), std::end(kWorkloadKinds));
  Fields w(node, "/workloads/" + std::to_string(i), file);
  WorkloadConfig workload;
  workload.name = w.name("name");
  workload.kind = w.string("kind", "", true);
  if (kinds.count(workload.kind) == 0) fail(file, w.at("kind"), "'" + workload.kind + "' is not a workload kind");
  workload.context_tokens = static_cast<int>(w.integer("context_tokens", 0, 0, 1 << 24));
  workload.gen_tokens = static_cast<int>(w.integer("gen_tokens", 0, 0, 1 << 20));
  workload.turns = static_cast<int>(w.integer("turns", 0, 0, 10000));
  workload.images = static_cast<int>(w.integer("images", 0, 0, 1000));
  workload.visual_tokens = static_cast<int>(w.integer("visual_tokens", 0, 0, 1 << 16));
  workload.windows = static_cast<int>(w.integer("windows", 0, 0, 1 << 20));
  workload.requests = static_cast<int>(w.integer("requests", 0, 0, 10000));
  workload.sessions = static_cast<int>(w.integer("sessions", 0, 0, 10000));
  workload.system_prompt_tokens = static_cast<int>(w.integer("system_prompt_tokens", 0, 0, 1 << 24));
  workload.user_tokens = static_cast<int>(w.integer("user_tokens", 0, 0, 1 << 20));
  workload.text = w.string("text", "");
  workload.full_prefill = w.boolean("full_prefill", false);
  if (const json* list = w.child("models"); list != nullptr) {
    workload.models = read_model_names(*list, w.at("models"), file);
    check_model_names(workload.models, models, w.at("models"), file);
  }
  workload.ttft_target_ms = w.number("ttft_target_ms", 0.0);
  workload.tpot_target_ms = w.number("tpot_target_ms", 0.0);
  if (workload.ttft_target_ms < 0.0) fail(file, w.at("ttft_target_ms"), "must be >= 0");
  if (workload.tpot_target_ms < 0.0) fail(file, w.at("tpot_target_ms"), "must be >= 0");
  // A field the kind does not use would be silently ignored: refused, naming the kind it is for.
  for (const auto& [field, kind] : {std::pair<const char*, const char*>{"turns", "roleplay"}, {"images", "multimodal"},
                                    {"visual_tokens", "multimodal"}, {"windows", "perplexity"},
                                    {"requests", "rag"}, {"sessions", "roleplay"}, {"system_prompt_tokens", "roleplay"},
                                    {"user_tokens", "roleplay"}}) {
    if (w.has(field) && workload.kind != kind) {
      fail(file, w.at(field), fmt::format("a {} workload does not use it (only {} does)", workload.kind, kind));
    }
  }
  w.done();
  return workload;
}

// A policy given inline, or by name: <suite dir>/policies/NAME.json, else
// <suite dir>/../policies/NAME.json (a suite in configs/suites/ finds configs/policies/).
PolicyConfig read_suite_policy(const json& node, std::size_t i, const std::string& file, const std::string& base_dir,
                               const std::vector<ModelConfig>& models) {
  const std::string path = "/policies/" + std::to_string(i);
  if (!node.is_string()) {
    PolicyConfig policy = read_policy(node, path, file, base_dir);
    check_model_names(policy.models, models, path + "/models", file);
    return policy;
  }
  const std::string name = node.get<std::string>();
  if (name.empty() || name.find('/') != std::string::npos) fail(file, path, "'" + name + "' is not a policy name");
  std::string named = base_dir + "/policies/" + name + ".json";
  if (!std::ifstream(named)) {
    const std::string parent = base_dir + "/../policies/" + name + ".json";
    if (!std::ifstream(parent)) fail(file, path, "no policy '" + name + "' (looked for " + named + " and " + parent + ")");
    named = parent;
  }
  const json policy = parse_strict(read_text_file(named, path), named);
  PolicyConfig read = read_policy(policy, "", named, base_dir);
  check_model_names(read.models, models, "/models", named);
  return read;
}

std::vector<std::string> read_socs(const json* socs, const std::string& file) {
  if (socs == nullptr) return {"host"};
  if (!socs->is_array() || socs->empty()) fail(file, "/socs", "must be a non-empty array of SoC names");
  std::vector<std::string> out;
  for (std::size_t i = 0; i < socs->size(); ++i) {
    if (!(*socs)[i].is_string()) fail(file, "/socs/" + std::to_string(i), "must be a string");
    const std::string soc = (*socs)[i].get<std::string>();
    if (!is_builtin_soc(soc)) {
      fail(file, "/socs/" + std::to_string(i), "unknown SoC profile '" + soc + "' (profiles: " + builtin_soc_names() + ")");
    }
    out.push_back(soc);
  }
  return out;
}

// What involves two sections: names identify cases (no two alike in one list), and a window
// must fit every synthetic model's context.
void check_across(const SuiteConfig& suite, const std::string& file) {
  // Names identify cases: no two alike in one list.
  const auto unique = [&](const std::vector<std::string>& names, const std::string& list) {
    std::set<std::string> seen;
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (!seen.insert(names[i]).second) fail(file, "/" + list + "/" + std::to_string(i) + "/name", "duplicate name '" + names[i] + "'");
    }
  };
  std::vector<std::string> names;
  for (const auto& m : suite.models) names.push_back(m.name);
  unique(names, "models");
  names.clear();
  for (const auto& w : suite.workloads) names.push_back(w.name);
  unique(names, "workloads");
  names.clear();
  for (const auto& p : suite.policies) names.push_back(p.name);
  unique(names, "policies");
  // Impossible values that involve two sections.
  for (std::size_t p = 0; p < suite.policies.size(); ++p) {
    const int window = suite.policies[p].sparse.window;
    for (std::size_t m = 0; m < suite.models.size(); ++m) {
      const ModelConfig& model = suite.models[m];
      if (model.backend != "synthetic") continue;  // a llama model's context is checked once it is loaded
      const kv::SyntheticPreset& preset = kv::find_synthetic_preset(model.preset, "preset");
      if (window > preset.max_seq_long) {
        fail(file, "/policies/" + std::to_string(p) + "/sparse/window",
             "window " + std::to_string(window) + " is larger than model '" + model.name + "' context (" +
                 std::to_string(preset.max_seq_long) + " tokens)");
      }
    }
  }
}

}  // namespace

DeviceGate read_device_gate(const json& block, const std::string& path, const std::string& file) {
  Fields d(block, path, file);
  DeviceGate gate;
  if (d.has("max_start_temp_c")) {
    const double c = d.number("max_start_temp_c", 0.0);
    if (c <= 0.0 || c > 150.0) fail(file, d.at("max_start_temp_c"), fmt::format("{} must be in (0, 150] degrees Celsius", c));
    gate.max_start_temp_c = c;
  }
  gate.cool_timeout_s = d.number("cool_timeout_s", gate.cool_timeout_s);
  if (gate.cool_timeout_s < 0.0 || gate.cool_timeout_s > 86400.0) {
    fail(file, d.at("cool_timeout_s"), fmt::format("{} must be in [0, 86400] seconds", gate.cool_timeout_s));
  }
  if (d.has("cool_timeout_s") && !gate.max_start_temp_c) fail(file, d.at("cool_timeout_s"), "needs max_start_temp_c: there is nothing to wait for");
  d.done();
  return gate;
}

SuiteConfig parse_suite(const std::string& text, const std::string& file, const std::string& base_dir) {
  const json root = parse_strict(text, file);
  Fields f(root, "", file);
  SuiteConfig suite;
  suite.file = file;
  suite.base_dir = base_dir;
  suite.name = f.name("name");
  suite.seed = static_cast<std::uint64_t>(f.integer("seed", 1, 0, std::numeric_limits<std::int64_t>::max()));
  suite.repetitions = static_cast<int>(f.integer("repetitions", suite.repetitions, 1, 1000));
  suite.warmup = static_cast<int>(f.integer("warmup", suite.warmup, 0, 100));
  suite.noise_threshold = f.number("noise_threshold", suite.noise_threshold);
  if (suite.noise_threshold < 0.0 || suite.noise_threshold > 1.0) fail(file, "/noise_threshold", "must be in [0, 1]");
  suite.prefix_warm = f.boolean("prefix_warm", false);
  suite.sim = f.boolean("sim", false);
  if (const json* device = f.child("device")) suite.device = read_device_gate(*device, f.at("device"), file);
  f.child("models");
  const json& models = array_field(root, "models", file);
  for (std::size_t i = 0; i < models.size(); ++i) suite.models.push_back(read_model(models[i], i, file));
  f.child("workloads");
  const json& workloads = array_field(root, "workloads", file);
  for (std::size_t i = 0; i < workloads.size(); ++i) suite.workloads.push_back(read_workload(workloads[i], i, file, suite.models));
  f.child("policies");
  const json& policies = array_field(root, "policies", file);
  for (std::size_t i = 0; i < policies.size(); ++i) suite.policies.push_back(read_suite_policy(policies[i], i, file, base_dir, suite.models));
  suite.socs = read_socs(f.child("socs"), file);
  f.done();
  check_across(suite, file);
  return suite;
}

SuiteConfig load_suite(const std::string& path) {
  const std::string text = read_text_file(path, "suite");
  const auto slash = path.find_last_of('/');
  return parse_suite(text, path, slash == std::string::npos ? "." : path.substr(0, slash));
}

}  // namespace kvbench

namespace kvbench {

namespace {

json memory_json(const kv::MemoryConfig& m) {
  return json{{"l0_bytes", m.l0_bytes},
              {"l0_copy", m.l0_copy},
              {"l1_bytes", m.l1_bytes},
              {"l2_dir", m.l2.dir},
              {"l2_segment_bytes", m.l2.segment_bytes},
              {"l2_batch_bytes", m.l2.batch_bytes},
              {"l2_max_bytes", m.l2.max_bytes},
              {"l2_overprovision", m.l2.overprovision},
              {"l2_direct_io", m.l2.direct_io},
              {"l2_queue_depth", m.l2.queue_depth},
              {"l2_max_read_bytes", m.l2.max_read_bytes},
              {"prefetch_lookahead", m.prefetch_lookahead},
              {"warning_free", m.warning_free},
              {"target_free", m.target_free},
              {"danger_pinned", m.danger_pinned},
              {"demote_batch_pages", m.demote_batch_pages},
              {"mem_available_floor_bytes", m.mem_available_floor_bytes},
              {"importance_decay", shortest(m.importance_decay)},
              {"selection_shift", m.selection_shift}};
}

json sparse_json(const kv::SparsePolicy& s) {
  return json{{"selector", std::string(kv::selector_name(s.selector))},
              {"sinks", s.sinks},
              {"window", s.window},
              {"budget", shortest(s.budget)},
              {"budget_pages", s.budget_pages},
              {"allow_pinned_only", s.allow_pinned_only},
              {"alpha", shortest(s.alpha)},
              {"beta", shortest(s.beta)},
              {"gamma", shortest(s.gamma)},
              {"decay", shortest(s.decay)},
              {"compensation", s.compensation == kv::Compensation::MeanV ? "mean_v" : "none"},
              {"sparse_prefill", s.sparse_prefill},
              {"sample_every", s.sample_every},
              {"top_m", s.top_m}};
}

json model_json(const ModelConfig& m) {
  json j{{"name", m.name}, {"backend", m.backend}};
  if (m.backend == "synthetic") {
    j["preset"] = m.preset;
    j["sample_layers"] = m.sample_layers;
    j["weights"] = m.weights;
    j["synthetic"] = synthetic_block_json(m.synthetic);
  } else {
    j["path"] = m.path;
    j["tokenizer"] = m.tokenizer;
    if (m.fetched) j["fetched"] = true;  // only when set: suites without it keep their hash
  }
  return j;
}

json workload_json(const WorkloadConfig& raw) {
  const WorkloadConfig w = with_defaults(raw, 0);
  json j{{"name", w.name},
         {"kind", w.kind},
         {"context_tokens", w.context_tokens},
         {"gen_tokens", w.gen_tokens},
         {"turns", w.turns},
         {"images", w.images},
         {"visual_tokens", w.visual_tokens},
         {"windows", w.windows},
         {"text", w.text},
         {"ttft_target_ms", w.ttft_target_ms},
         {"tpot_target_ms", w.tpot_target_ms}};
  if (!w.models.empty()) j["models"] = w.models;  // only when set, as "fetched"
  if (w.kind == "rag") j["requests"] = w.requests;
  if (w.full_prefill) j["full_prefill"] = true;  // only when set: workloads without it keep their hash
  if (w.kind == "roleplay") {
    j["sessions"] = w.sessions;
    j["system_prompt_tokens"] = w.system_prompt_tokens;
    j["user_tokens"] = w.user_tokens;
  }
  return j;
}

json policy_json(const PolicyConfig& p) {
  const kv::CacheConfig& c = p.cache;
  json j{{"name", p.name},
         {"k", std::string(kv::format_name(c.k_format))},
         {"v", std::string(kv::format_name(c.v_format))},
         {"v_group", c.v_group},
         {"page_tokens", c.page_tokens},
         {"residual_tokens", c.residual_tokens},
         {"pad_pages_to_4k", c.pad_pages_to_4k},
         {"threads", c.threads},
         {"isa", std::string(kv::isa_name(c.isa))},
         {"split_pages", c.split_pages},
         {"test_slowdown", p.test_slowdown},
         {"sparse", sparse_json(p.sparse)},
         {"memory", memory_json(c.memory)}};
  if (!p.models.empty()) j["models"] = p.models;  // only when set, as "fetched"
  if (c.test_repeat_attention > 0.0) j["test_repeat_attention"] = c.test_repeat_attention;  // likewise
  if (p.sparse.visual.enabled()) {  // likewise
    j["visual"] = {{"budget", shortest(p.sparse.visual.budget)}, {"min_pages_per_image", p.sparse.visual.min_pages_per_image}};
    if (c.visual.tier == kv::VisualTier::L2) j["visual"]["tier"] = "l2";  // likewise
    if (c.visual.own) {  // only when set: blocks without formats of their own keep their hash
      j["visual"]["k_format"] = std::string(kv::format_name(c.visual.k_format));
      j["visual"]["v_format"] = std::string(kv::format_name(c.visual.v_format));
      j["visual"]["v_group"] = c.visual.v_group;
    }
  }
  if (c.prefix_cache) {  // only when set: policies without it keep their hash
    j["prefix_cache"] = true;
    j["prefix_cache_bytes"] = c.prefix_cache_bytes;
  }
  if (p.speculative.enabled) {  // likewise
    const SpeculativeConfig& s = p.speculative;
    j["speculative"] = {{"draft", s.draft},
                        {"k", s.k},
                        {"draft_k_format", std::string(kv::format_name(s.draft_k_format))},
                        {"draft_v_format", std::string(kv::format_name(s.draft_v_format))},
                        {"accept_rate", s.accept_rate}};
  }
  return j;
}

}  // namespace

std::string resolved_json(const SuiteConfig& suite) {
  json root{{"name", suite.name},
            {"benchmark_definition", kBenchmarkDefinition},
            {"file", suite.file},
            {"seed", suite.seed},
            {"repetitions", suite.repetitions},
            {"warmup", suite.warmup},
            {"noise_threshold", suite.noise_threshold},
            {"socs", suite.socs}};
  if (suite.prefix_warm) root["prefix_warm"] = true;  // only when set: suites without it keep their hash
  if (suite.sim) root["sim"] = true;                  // likewise
  if (suite.device.max_start_temp_c) {                 // likewise
    root["device"] = {{"max_start_temp_c", *suite.device.max_start_temp_c}, {"cool_timeout_s", suite.device.cool_timeout_s}};
  }
  json models = json::array(), workloads = json::array(), policies = json::array();
  for (const ModelConfig& m : suite.models) models.push_back(model_json(m));
  for (const WorkloadConfig& w : suite.workloads) workloads.push_back(workload_json(w));
  for (const PolicyConfig& p : suite.policies) policies.push_back(policy_json(p));
  root["models"] = models;
  root["workloads"] = workloads;
  root["policies"] = policies;
  return root.dump();
}

}  // namespace kvbench
