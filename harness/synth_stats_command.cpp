#include "synth_stats_command.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli_checks.h"
#include "model/synthetic_stats.h"
#include "runtime/error.h"

namespace kvbench {

void add_synth_stats_command(CLI::App& app, SynthStatsOptions& o) {
  auto* cmd = app.add_subcommand("synth-stats", "Measure the synthetic generator's statistics for a preset and context");
  cmd->add_option("--preset", o.preset, "llama-7b-gqa, qwen-1.5b-gqa or qwen-0.5b-gqa");
  cmd->add_option("--statistics", o.statistics, "published (head types, the default) or uniform-heads (benchmark definitions 1-3)");
  cmd->add_option("--ctx", o.ctx, "context tokens");
  cmd->add_option("--steps", o.steps, "decode steps measured (>= 2; reuse_loss_4 needs >= 5)");
  cmd->add_option("--sample-layers", o.sample_layers,
                  "layer pairs measured: layer l at the middle of each of this many equal bands, and l+1 for adjacent_layer_overlap (every layer from half the model's layers on)");
  cmd->add_option("--kv-heads", o.kv_heads, "the first this many kv heads of each layer (0 = all)");
  cmd->add_option("--seed", o.seed, "generator seed");
  cmd->add_option("--threads", o.threads, "threads (0 = all cores)")->check(thread_count());
  cmd->add_flag("--json", o.json, "print JSON");
}

namespace {

// Layer l at the middle of each of sample_layers bands, and l+1 beside it; every layer when
// the pairs would cover the model anyway.
std::vector<int> sampled_layers(const kv::SyntheticPreset& preset, int sample_layers) {
  std::vector<int> layers;
  if (2 * sample_layers >= preset.layers) {
    for (int l = 0; l < preset.layers; ++l) layers.push_back(l);
  }
  for (int i = 0; i < sample_layers && 2 * sample_layers < preset.layers; ++i) {
    const int l = (2 * i + 1) * preset.layers / (2 * sample_layers);
    if (std::find(layers.begin(), layers.end(), l) == layers.end()) layers.push_back(l);
    if (l + 1 < preset.layers && std::find(layers.begin(), layers.end(), l + 1) == layers.end()) layers.push_back(l + 1);
  }
  return layers;
}

std::string stats_json(const SynthStatsOptions& o, const kv::SyntheticPreset& preset, const std::vector<int>& layers, const kv::SyntheticStats& s) {
  nlohmann::ordered_json out;
  out["preset"] = o.preset;
  out["statistics"] = o.statistics;
  out["ctx"] = s.ctx;
  out["steps"] = s.steps;
  out["layers"] = layers;
  out["kv_heads"] = o.kv_heads > 0 ? std::min(o.kv_heads, preset.kv_heads) : preset.kv_heads;
  out["sink_mass"] = s.sink_mass;
  out["window_mass"] = s.window_mass;
  out["heavy_mass"] = s.heavy_mass;
  out["tail_mass"] = s.tail_mass;
  out["heavy_token_share"] = s.heavy_token_share;
  out["window_half_distance"] = s.window_half_distance;
  out["query_cosine"] = s.query_cosine;
  out["outlier_gain"] = s.outlier_gain;
  out["needles"] = s.needles;
  out["needle_mass"] = s.needle_mass;
  out["needle_top1"] = s.needle_top1;
  for (const auto& [name, t] : s.types) {
    auto& j = out["types"][name];
    j["heads"] = t.heads;
    j["sink_mass"] = t.sink_mass;
    j["window_mass"] = t.window_mass;
    j["heavy_mass"] = t.heavy_mass;
    j["floor_mass"] = t.floor_mass;
    j["oracle_page_recall_5"] = t.oracle_page_recall_5;
    j["oracle_page_recall_10"] = t.oracle_page_recall_10;
    j["tokens_for_90pct_mass"] = t.tokens_for_90pct_mass;
    if (t.reuse_samples > 0) j["reuse_loss_4"] = t.reuse_loss_4;
    if (t.overlap_samples > 0) j["adjacent_layer_overlap"] = t.adjacent_layer_overlap;
    if (t.needle_samples > 0) j["needle_mass"] = t.needle_mass;
  }
  out["clock"] = "exact";
  return out.dump();
}

void print_stats(const SynthStatsOptions& o, const kv::SyntheticConfig& config, const std::vector<int>& layers, const kv::SyntheticStats& s) {
  fmt::print("synthetic {} ({}) at {} tokens, {} decode steps, layers {}, seed {} [clock: exact]\n", o.preset, o.statistics,
             s.ctx, s.steps, fmt::join(layers, ","), o.seed);
  fmt::print("  attention mass   mean    min-max over (layer, q head)\n");
  fmt::print("  sinks ({:>4})    {:.3f}   {:.3f}-{:.3f}\n", config.sinks, s.sink_mass, s.sink_mass_min, s.sink_mass_max);
  fmt::print("  window ({:>4})   {:.3f}   {:.3f}-{:.3f}   (half of it within {:.0f} tokens)\n", config.window, s.window_mass,
             s.window_mass_min, s.window_mass_max, s.window_half_distance);
  fmt::print("  heavy hitters    {:.3f}   {:.3f}-{:.3f}   ({:.2f}% of tokens)\n", s.heavy_mass, s.heavy_mass_min,
             s.heavy_mass_max, 100.0 * s.heavy_token_share);
  fmt::print("  floor            {:.3f}\n", s.tail_mass);
  fmt::print("  consecutive query cosine {:.3f}\n", s.query_cosine);
  fmt::print("  outlier key channels: {} per head at {:.1f}x the median channel |k| ({:.1f}-{:.1f})\n",
             config.outlier_channels, s.outlier_gain, s.outlier_gain_min, s.outlier_gain_max);
  fmt::print("  needles: {} planted; a question puts {:.3f} of its attention on its needle, top-1 in {:.0f}%\n",
             s.needles, s.needle_mass, 100.0 * s.needle_top1);
  fmt::print("\n  {:<10} {:>5} {:>6} {:>6} {:>6} {:>6} {:>9} {:>9} {:>9} {:>8} {:>9}\n", "heads", "n", "sinks", "window",
             "spans", "floor", "recall_5", "recall_10", "tok_90%", "reuse_4", "adj_layer");
  for (const char* name : {"streaming", "retrieval", "diffuse", "uniform", "all"}) {
    const auto it = s.types.find(name);
    if (it == s.types.end()) continue;
    const kv::HeadTypeStats& t = it->second;
    fmt::print("  {:<10} {:>5} {:>6.3f} {:>6.3f} {:>6.3f} {:>6.3f} {:>9.3f} {:>9.3f} {:>9.0f} {:>8} {:>9}\n", name, t.heads,
               t.sink_mass, t.window_mass, t.heavy_mass, t.floor_mass, t.oracle_page_recall_5, t.oracle_page_recall_10,
               t.tokens_for_90pct_mass, t.reuse_samples > 0 ? fmt::format("{:.4f}", t.reuse_loss_4) : std::string("-"),
               t.overlap_samples > 0 ? fmt::format("{:.3f}", t.adjacent_layer_overlap) : std::string("-"));
  }
  fmt::print("  (spans: the head's spans outside the window; recall_k: mass in the best k% of 64-token pages per q head;"
             " reuse_4: mass lost reusing one step's best 10% for 4 steps, - under 5 steps; adj_layer: best-10% pages shared"
             " by layers l and l+1)\n");
}

}  // namespace

int run_synth_stats(const SynthStatsOptions& o) {
  const kv::SyntheticPreset& preset = kv::find_synthetic_preset(o.preset, "kvbench synth-stats --preset");
  if (o.ctx < 1 || o.ctx > preset.max_seq_long) {
    throw kv::InputError("kvbench synth-stats", "--ctx", fmt::format("must be in 1..{}", preset.max_seq_long));
  }
  if (o.sample_layers < 1 || o.sample_layers > preset.layers) {
    throw kv::InputError("kvbench synth-stats", "--sample-layers", fmt::format("must be in 1..{}", preset.layers));
  }
  if (o.steps < 2 || o.steps > 64) throw kv::InputError("kvbench synth-stats", "--steps", "must be in 2..64");
  if (o.kv_heads < 0) throw kv::InputError("kvbench synth-stats", "--kv-heads", "must be >= 0");
  kv::SyntheticConfig config;
  if (o.statistics == "uniform-heads") {
    config.statistics = kv::SyntheticStatistics::UniformHeads;
  } else if (o.statistics != "published") {
    throw kv::InputError("kvbench synth-stats", "--statistics", "'" + o.statistics + "' is not one of published, uniform-heads");
  }
  config.seed = o.seed;
  config.calibration_ctx = o.ctx;
  // Needles at 10%, 50% and 90% of the context (outside the window, never sinks).
  for (double at : {0.1, 0.5, 0.9}) {
    const int pos = static_cast<int>(at * o.ctx);
    if (pos >= config.sinks && pos < o.ctx - config.window) config.needles.push_back(pos);
  }
  const std::vector<int> layers = sampled_layers(preset, o.sample_layers);
  kv::ThreadPool pool(o.threads);
  const kv::SyntheticModel model(preset, config, layers, o.ctx + o.steps, pool);
  const kv::SyntheticStats s = kv::measure_synthetic(model, {o.ctx, o.steps, o.kv_heads}, pool);
  if (o.json) {
    fmt::print("{}\n", stats_json(o, preset, layers, s));
  } else {
    print_stats(o, config, layers, s);
  }
  return 0;
}

}  // namespace kvbench
