#include "attn_stats_command.h"

#include <fmt/format.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "cli_checks.h"
#include "model_loader.h"
#include "runtime/error.h"

namespace kvbench {

void add_attn_stats_command(CLI::App& app, AttnStatsOptions& o) {
  auto* cmd = app.add_subcommand("attn-stats", "How a real model attends over a text: sink, recent and top-key mass per layer and head");
  add_real_model_options(cmd, o.model, o.tokenizer, o.text, "text file");
  cmd->add_option("--window", o.stats.window, "tokens per window, each from position 0 (default: the model's context)")
      ->check(whole_number_in(2, 1 << 24));
  cmd->add_option("--max-windows", o.stats.max_windows, "measure only this many windows (0 = every whole window)")
      ->check(whole_number_in(0, 1 << 24));
  cmd->add_option("--sinks", o.stats.sinks, "sink tokens: the first of a window")->check(whole_number_in(0, 1 << 24));
  cmd->add_option("--recent", o.stats.recent, "recent tokens: the last before and at the query")->check(whole_number_in(1, 1 << 24));
  cmd->add_option("--top-share", o.stats.top_share, "the heaviest keys, as a share of the query's context");
  cmd->add_option("--first-query", o.stats.first_query,
                  "queries at positions from this one to the window's end (default: half the window)")
      ->check(whole_number_in(0, 1 << 24));
  cmd->add_option("--threads", o.threads, "threads of the model's dense layers")->check(thread_count());
  cmd->add_flag("--json", o.json, "print JSON");
}

int run_attn_stats(const AttnStatsOptions& o) {
  const LoadedLlama model = load_llama(o.model, o.tokenizer);
  AttentionStatsOptions options = o.stats;
  if (options.window == 0) options.window = model.weights->config.seq_len;
  if (options.window > model.weights->config.seq_len) {
    throw kv::InputError("--window", std::to_string(options.window),
                         fmt::format("is larger than the context of {} ({} positions)", o.model, model.weights->config.seq_len));
  }
  if (!(options.top_share > 0.0 && options.top_share <= 1.0)) {
    throw kv::InputError("--top-share", fmt::format("{}", options.top_share), "must be in (0, 1]");
  }
  const int window = options.window;
  if (options.sinks >= window) {
    throw kv::InputError("--sinks", std::to_string(options.sinks), fmt::format("must be below the window ({} tokens)", window));
  }
  if (options.recent > window) {
    throw kv::InputError("--recent", std::to_string(options.recent), fmt::format("must be at most the window ({} tokens)", window));
  }
  if (options.first_query >= window) {
    throw kv::InputError("--first-query", std::to_string(options.first_query),
                         fmt::format("must be below the window ({} tokens)", window));
  }
  const std::vector<int> tokens = model.tokenizer.encode(read_text_file(o.text, "--text"), true, false);
  if (tokens.size() < static_cast<std::size_t>(window)) {
    throw kv::InputError(o.text, "--text", fmt::format("{} tokens, fewer than one window of {}", tokens.size(), window));
  }
  kv::ThreadPool pool(o.threads);
  const AttentionStats s = measure_attention(model.weights, tokens, options, pool);
  const kv::LlamaConfig& c = model.weights->config;
  if (o.json) {
    nlohmann::ordered_json out;
    out["model"] = o.model;
    out["text"] = o.text;
    out["window"] = options.window;
    out["windows"] = s.windows;
    out["first_query"] = s.first_query;
    out["queries_per_window"] = s.queries_per_window;
    out["sinks"] = options.sinks;
    out["recent"] = options.recent;
    out["top_share"] = options.top_share;
    auto row = [](const HeadAttention& a) {
      return nlohmann::ordered_json{{"sink_mass", a.sink_mass},
                                    {"recent_mass", a.recent_mass},
                                    {"top_mass", a.top_mass},
                                    {"next_layer_overlap", a.next_layer_overlap}};
    };
    for (const HeadAttention& a : s.heads) {
      nlohmann::ordered_json j{{"layer", a.layer}, {"head", a.head}};
      j.update(row(a));
      if (a.layer + 1 == c.layers) j.erase("next_layer_overlap");
      out["heads"].push_back(j);
    }
    out["mean"] = row(s.mean);
    out["clock"] = "exact";
    fmt::print("{}\n", out.dump());
    return 0;
  }
  fmt::print("{}: {} layers x {} q heads (head_dim {}), {} window{} of {} tokens, queries at positions {}..{} [clock: exact]\n",
             o.model, c.layers, c.heads, c.head_dim(), s.windows, s.windows == 1 ? "" : "s", options.window, s.first_query,
             options.window - 1);
  const int top_pct = static_cast<int>(std::lround(100.0 * options.top_share));
  fmt::print("  {:>5} {:>4} {:>9} {:>10} {:>9} {:>13}\n", "layer", "head", fmt::format("sinks({})", options.sinks),
             fmt::format("recent({})", options.recent), fmt::format("top{}%", top_pct), "overlap(l+1)");
  for (const HeadAttention& a : s.heads) {
    fmt::print("  {:>5} {:>4} {:>9.3f} {:>10.3f} {:>9.3f} {:>13}\n", a.layer, a.head, a.sink_mass, a.recent_mass, a.top_mass,
               a.layer + 1 < c.layers ? fmt::format("{:.3f}", a.next_layer_overlap) : "-");
  }
  fmt::print("  {:>10} {:>9.3f} {:>10.3f} {:>9.3f} {:>13.3f}\n", "mean", s.mean.sink_mass, s.mean.recent_mass, s.mean.top_mass,
             s.mean.next_layer_overlap);
  return 0;
}

}  // namespace kvbench
