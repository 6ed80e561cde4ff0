#include "sparse_eval_command.h"

#include "cli_checks.h"
#include "recorder.h"
#include "selection_quality.h"

#include <fmt/format.h>

#include "model/synthetic.h"
#include "quant/format.h"
#include "runtime/error.h"
#include "sparse/sparse_decoder.h"

namespace kvbench {

void add_sparse_eval_command(CLI::App& app, SparseEvalOptions& o) {
  auto* cmd = app.add_subcommand("sparse-eval", "Measure a sparse policy on a synthetic layer against exact attention");
  cmd->add_option("--preset", o.preset, "synthetic preset");
  cmd->add_option("--ctx", o.ctx, "context tokens");
  cmd->add_option("--selector", o.selector, "full, window, quest, h2o, recency or hybrid");
  cmd->add_option("--budget", o.budget, "fraction of pages (selecting kinds)");
  cmd->add_option("--format", o.format, "K and V format");
  cmd->add_option("--steps", o.steps, "decode steps before the questions");
  cmd->add_flag("--compensate", o.compensate, "compensation mean_v");
  cmd->add_option("--threads", o.threads, "threads (0 = all cores)")->check(thread_count());
  cmd->add_option("--statistics", o.statistics, "the generator's statistics: published (the default) or uniform-heads");
}

int run_sparse_eval(const SparseEvalOptions& o) {
  const kv::SyntheticPreset& preset = kv::find_synthetic_preset(o.preset, "kvbench sparse-eval --preset");
  kv::SyntheticConfig config;
  if (o.statistics == "uniform-heads") {
    config.statistics = kv::SyntheticStatistics::UniformHeads;
  } else if (o.statistics != "published") {
    throw kv::InputError("kvbench sparse-eval", "--statistics", "'" + o.statistics + "' is not one of published, uniform-heads");
  }
  config.calibration_ctx = o.ctx;
  for (double at : {0.1, 0.5, 0.9}) config.needles.push_back(static_cast<int>(at * o.ctx));
  kv::ThreadPool pool(o.threads);
  kv::SyntheticModel model(preset, config, {preset.layers / 2}, o.ctx + o.steps + 8, pool);
  kv::CacheConfig cache_config;
  cache_config.geometry = model.geometry();
  cache_config.k_format = kv::parse_format(o.format, "kvbench sparse-eval", "--format");
  cache_config.v_format = cache_config.k_format;
  cache_config.page_tokens = 64;
  cache_config.threads = o.threads;
  kv::KVCache cache(cache_config);
  const kv::SeqId seq = cache.create_sequence();
  kv::StepBuffers buffers;
  kv::run_step(model, cache, seq, nullptr, o.ctx, 0, buffers, kv::StepAttention::AppendOnly);

  kv::SparsePolicy policy;
  policy.selector = kv::parse_selector(o.selector, "kvbench sparse-eval");
  if (policy.needs_budget()) policy.budget = o.budget;
  policy.sample_every = 1;
  policy.compensation = o.compensate ? kv::Compensation::MeanV : kv::Compensation::None;
  const int dim = preset.head_dim;
  std::vector<float> q(static_cast<std::size_t>(preset.q_heads) * dim), out(q.size());
  std::vector<float> k(static_cast<std::size_t>(preset.kv_heads) * dim), v(k.size());
  auto step = [&](kv::SparseDecoder& decoder, QualityMonitor& monitor, int pos) {
    for (int h = 0; h < preset.kv_heads; ++h) {
      model.exact_key(0, h, pos, k.data() + static_cast<std::size_t>(h) * dim);
      model.exact_value(0, h, pos, v.data() + static_cast<std::size_t>(h) * dim);
    }
    decoder.apply(cache.append(seq, 0, k.data(), v.data(), 1));
    for (int h = 0; h < preset.q_heads; ++h) model.query(preset.layers / 2, h, pos, q.data() + static_cast<std::size_t>(h) * dim);
    decoder.attend(seq, 0, q.data(), out.data());
    monitor.check(cache, decoder, q.data(), out.data());
    decoder.end_step();
  };
  // The recorders keep the quality means (one owner of every figure).
  Recorder decode_figures, question_figures;
  kv::SparseDecoder decode(cache, policy, &decode_figures);
  QualityMonitor decode_quality(model, policy, &decode_figures);
  int pos = o.ctx;
  for (int s = 0; s < o.steps; ++s) step(decode, decode_quality, pos++);
  kv::SparseDecoder questions(cache, policy, &question_figures);
  QualityMonitor question_quality(model, policy, &question_figures);
  for (std::size_t n = 0; n < config.needles.size(); ++n) {
    model.ask_needle(static_cast<int>(n));
    step(questions, question_quality, pos++);
  }
  model.ask_needle(-1);
  fmt::print("sparse-eval {} @{} tokens, {} {} budget {}{}, {} decode steps + {} questions [clock: exact]\n", o.preset,
             o.ctx, o.format, o.selector, policy.needs_budget() ? fmt::format("{:.0f}%", 100.0 * o.budget) : "-",
             o.compensate ? " +mean_v" : "", o.steps, config.needles.size());
  fmt::print("  decode:    attn_mass_recall {:.4f} (oracle {:.4f})  critical_miss_rate {:.4f} (oracle {:.4f})  token_drop_ratio {:.4f}\n",
             decode_figures.attn_mass_recall(), decode_figures.oracle_mass_recall(), decode_figures.critical_miss_rate(),
             decode_figures.oracle_critical_miss_rate(), decode_figures.token_drop_ratio());
  fmt::print("  questions: needle_recall {:.3f}  attn_mass_recall {:.4f}\n", question_figures.needle_recall(),
             question_figures.attn_mass_recall());
  return 0;
}

}  // namespace kvbench
