#include "synth_stats_command.h"

#include <fmt/format.h>

#include "model/synthetic_stats.h"
#include "runtime/error.h"

namespace kvbench {

void add_synth_stats_command(CLI::App& app, SynthStatsOptions& o) {
  auto* cmd = app.add_subcommand("synth-stats", "Measure the synthetic generator's statistics for a preset and context");
  cmd->add_option("--preset", o.preset, "llama-7b-gqa, qwen-1.5b-gqa or qwen-0.5b-gqa");
  cmd->add_option("--ctx", o.ctx, "context tokens (the calibration context of the mass targets)");
  cmd->add_option("--steps", o.steps, "decode steps measured (>= 2)");
  cmd->add_option("--sample-layers", o.sample_layers, "layers measured, spread over the model");
  cmd->add_option("--seed", o.seed, "generator seed");
  cmd->add_option("--threads", o.threads, "threads (0 = all cores)");
  cmd->add_flag("--json", o.json, "print JSON");
}

int run_synth_stats(const SynthStatsOptions& o) {
  const kv::SyntheticPreset& preset = kv::find_synthetic_preset(o.preset, "kvbench synth-stats --preset");
  if (o.ctx < 1 || o.ctx > preset.max_seq_long) {
    throw kv::InputError("kvbench synth-stats", "--ctx", fmt::format("must be in 1..{}", preset.max_seq_long));
  }
  if (o.sample_layers < 1 || o.sample_layers > preset.layers) {
    throw kv::InputError("kvbench synth-stats", "--sample-layers", fmt::format("must be in 1..{}", preset.layers));
  }
  kv::SyntheticConfig config;
  config.seed = o.seed;
  config.calibration_ctx = o.ctx;
  // Needles at 10%, 50% and 90% of the context (outside the window, never sinks).
  for (double at : {0.1, 0.5, 0.9}) {
    const int pos = static_cast<int>(at * o.ctx);
    if (pos >= config.sinks && pos < o.ctx - config.window) config.needles.push_back(pos);
  }
  std::vector<int> layers;
  for (int i = 0; i < o.sample_layers; ++i) layers.push_back(i * preset.layers / o.sample_layers);
  kv::ThreadPool pool(o.threads);
  kv::SyntheticModel model(preset, config, layers, o.ctx + o.steps, pool);
  const kv::SyntheticStats s = kv::measure_synthetic(model, o.ctx, o.steps, pool);
  if (o.json) {
    fmt::print(
        "{{\"preset\": \"{}\", \"ctx\": {}, \"steps\": {}, \"sample_layers\": {}, \"sink_mass\": {:.4f}, "
        "\"window_mass\": {:.4f}, \"heavy_mass\": {:.4f}, \"tail_mass\": {:.4f}, \"heavy_token_share\": {:.4f}, "
        "\"query_cosine\": {:.4f}, \"outlier_gain\": {:.2f}, \"needles\": {}, \"needle_mass\": {:.4f}, "
        "\"needle_top1\": {:.4f}, \"clock\": \"exact\"}}\n",
        o.preset, s.ctx, s.steps, o.sample_layers, s.sink_mass, s.window_mass, s.heavy_mass, s.tail_mass,
        s.heavy_token_share, s.query_cosine, s.outlier_gain, s.needles, s.needle_mass, s.needle_top1);
    return 0;
  }
  fmt::print("synthetic {} at {} tokens, {} decode steps, {} sampled layers, seed {} [clock: exact]\n", o.preset, s.ctx,
             s.steps, o.sample_layers, o.seed);
  fmt::print("  attention mass   mean    min-max over (layer, q head)\n");
  fmt::print("  sinks ({:>4})    {:.3f}   {:.3f}-{:.3f}   (target about 0.20-0.30)\n", config.sinks, s.sink_mass,
             s.sink_mass_min, s.sink_mass_max);
  fmt::print("  window ({:>4})   {:.3f}   {:.3f}-{:.3f}   (target about 0.30-0.40)\n", config.window, s.window_mass,
             s.window_mass_min, s.window_mass_max);
  fmt::print("  heavy hitters    {:.3f}   {:.3f}-{:.3f}   (target about 0.20; {:.2f}% of tokens)\n", s.heavy_mass,
             s.heavy_mass_min, s.heavy_mass_max, 100.0 * s.heavy_token_share);
  fmt::print("  tail             {:.3f}\n", s.tail_mass);
  fmt::print("  consecutive query cosine {:.3f} (target about 0.9)\n", s.query_cosine);
  fmt::print("  outlier key channels: {} per head at {:.1f}x the median channel |k| ({:.1f}-{:.1f})\n",
             config.outlier_channels, s.outlier_gain, s.outlier_gain_min, s.outlier_gain_max);
  fmt::print("  needles: {} planted; a question puts {:.3f} of its attention on its needle, top-1 in {:.0f}%\n",
             s.needles, s.needle_mass, 100.0 * s.needle_top1);
  return 0;
}

}  // namespace kvbench
