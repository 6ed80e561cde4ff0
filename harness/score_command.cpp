#include "score_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "accuracy.h"
#include "cli_checks.h"
#include "model_loader.h"
#include "quant/format.h"
#include "quant/page_layout.h"
#include "runtime/error.h"

namespace kvbench {

void add_score_command(CLI::App& app, ScoreOptions& o) {
  auto* cmd = app.add_subcommand("score", "Accuracy of a KV configuration on a real model (vs f32 KV, full attention)");
  add_real_model_options(cmd, o.model, o.tokenizer, o.text, "text file to score");
  cmd->add_option("--k", o.k, "K format: f32 f16 fp8 q8 q4 q2");
  cmd->add_option("--v", o.v, "V format: f32 f16 fp8 q8 q4 q2");
  cmd->add_option("--residual", o.residual_tokens, "full-precision residual tokens");
  cmd->add_option("--page-tokens", o.page_tokens, "tokens per page (16..256)");
  cmd->add_option("--v-group", o.v_group,
                  "channels per V scale group: a multiple of 8 that divides the model's head_dim (default 32; a group wider "
                  "than the head is the whole head)");
  cmd->add_option("--window", o.window, "tokens per scoring window (default: the model's context)")->check(whole_number_in(1, 1 << 24));
  cmd->add_option("--chunk", o.chunk, "tokens per step (1 = decode-like)");
  cmd->add_option("--max-windows", o.max_windows, "score only this many windows (0 = all)");
  cmd->add_option("--threads", o.threads, "engine threads (0 = all cores)")->check(thread_count());
  cmd->add_flag("--json", o.json, "print the report as JSON");
  cmd->add_option("--selector", o.selector, "sparse decode: full, window, quest, h2o, recency or hybrid");
  o.budget_option = cmd->add_option("--budget", o.budget, "sparse budget, a fraction of the context's pages (needs --selector)");
  o.budget_pages_option = cmd->add_option("--budget-pages", o.budget_pages, "sparse budget, a page count (needs --selector)");
  cmd->add_option("--sinks", o.sinks, "sparse: sink tokens");
  cmd->add_option("--sparse-window", o.sparse_window, "sparse: local window tokens");
  cmd->add_flag("--compensate", o.compensate, "sparse: compensation mean_v");
}


namespace {

// Everything the flags say before any model is loaded or text read.
void check_flags(const ScoreOptions& o, const kv::SparsePolicy& sparse) {
  const bool fraction = o.budget_option != nullptr && o.budget_option->count() > 0;
  const bool pages = o.budget_pages_option != nullptr && o.budget_pages_option->count() > 0;
  if (!sparse.needs_budget() && (fraction || pages)) {
    throw kv::InputError(fraction ? "--budget" : "--budget-pages", fraction ? fmt::format("{}", o.budget) : std::to_string(o.budget_pages),
                         fmt::format("selector {} takes no budget (give --selector quest, h2o, recency or hybrid)", o.selector));
  }
  if (sparse.needs_budget() && fraction == pages) {
    throw kv::InputError("--selector", o.selector,
                         fraction ? "give one of --budget and --budget-pages, not both"
                                  : "needs a budget: --budget (a fraction of the context's pages) or --budget-pages (a page count)");
  }
  if (o.chunk < 1) throw kv::InputError("--chunk", std::to_string(o.chunk), "must be >= 1");
}

}  // namespace

int run_score(const ScoreOptions& o) {
  const kv::Selector selector = kv::parse_selector(o.selector, "kvbench score --selector");
  {
    kv::SparsePolicy sparse;
    sparse.selector = selector;
    check_flags(o, sparse);
  }
  const LoadedLlama model = load_llama(o.model, o.tokenizer);
  const std::shared_ptr<const kv::LlamaWeights>& weights = model.weights;
  if (o.window > weights->config.seq_len) {
    throw kv::InputError("--window", std::to_string(o.window),
                         fmt::format("is larger than the context of {} ({} positions)", o.model, weights->config.seq_len));
  }
  const int window = o.window > 0 ? o.window : weights->config.seq_len;
  const int head_dim = weights->config.head_dim();
  if (o.v_group < 8 || o.v_group % 8 != 0 || head_dim % std::min(o.v_group, head_dim) != 0) {
    throw kv::InputError("--v-group", std::to_string(o.v_group),
                         fmt::format("must be a multiple of 8 that divides head_dim {} of {} (V groups that do: {})", head_dim,
                                     o.model, kv::v_group_choices(head_dim)));
  }
  if (o.chunk > window) {
    throw kv::InputError("--chunk", std::to_string(o.chunk), fmt::format("must be in [1, the window] (the window is {} tokens)", window));
  }
  const std::string text = read_text_file(o.text, "--text");
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    throw kv::InputError("--text", o.text, fmt::format("is empty ({} bytes{}): there is nothing to score", text.size(),
                                                       text.empty() ? "" : ", white space only"));
  }
  const std::vector<int> tokens = model.tokenizer.encode(text, true, false);
  // A text shorter than one window scores a part-window that no model run would see, and an
  // empty one scores nothing at all: both would print a perplexity that means nothing.
  if (tokens.size() < static_cast<std::size_t>(window)) {
    throw kv::InputError("--text", o.text,
                         fmt::format("encodes to {} token{} (with BOS), fewer than one scoring window of {} tokens; give a longer "
                                     "text or a smaller --window",
                                     tokens.size(), tokens.size() == 1 ? "" : "s", window));
  }

  kv::CacheConfig reference;
  reference.geometry = {weights->config.layers, weights->config.heads, weights->config.kv_heads,
                        weights->config.head_dim(), window};
  reference.k_format = kv::Format::F32;
  reference.v_format = kv::Format::F32;
  reference.page_tokens = o.page_tokens;
  reference.v_group = o.v_group;
  reference.threads = o.threads;
  kv::CacheConfig tested = reference;
  tested.k_format = kv::parse_format(o.k, "kvbench score", "--k");
  tested.v_format = kv::parse_format(o.v, "kvbench score", "--v");
  tested.residual_tokens = o.residual_tokens;
  ScoringConfig scoring{window, o.chunk, o.max_windows, {}};
  scoring.sparse.selector = selector;
  const bool pages = o.budget_pages_option != nullptr && o.budget_pages_option->count() > 0;
  scoring.sparse.budget = scoring.sparse.needs_budget() && !pages ? o.budget : 0.0f;
  scoring.sparse.budget_pages = scoring.sparse.needs_budget() && pages ? o.budget_pages : 0;
  scoring.sparse.sinks = o.sinks;
  scoring.sparse.window = o.sparse_window;
  scoring.sparse.compensation = o.compensate ? kv::Compensation::MeanV : kv::Compensation::None;
  kv::validate_sparse_policy(scoring.sparse, "kvbench score");
  kv::ThreadPool pool(o.threads);
  // Host time of the scoring alone (the model is loaded and the text encoded before the clock
  // starts); each position runs the model twice, with the tested cache and with the reference.
  const auto start = std::chrono::steady_clock::now();
  const AccuracyReport r = score_tokens(weights, reference, tested, tokens, scoring, pool);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double per_second = seconds > 0.0 ? static_cast<double>(r.predictions) / seconds : 0.0;
  if (o.json) {
    fmt::print(
        "{{\"k\": \"{}\", \"v\": \"{}\", \"selector\": \"{}\", \"budget\": {}, \"budget_pages\": {}, \"residual_tokens\": {}, "
        "\"page_tokens\": {}, \"v_group\": {}, \"predictions\": {}, "
        "\"ppl\": {:.6f}, \"reference_ppl\": {:.6f}, \"ppl_delta_pct\": {:.6f}, \"kl_mean\": {:.8f}, "
        "\"kl_p99\": {:.8f}, \"kl_max\": {:.8f}, \"top1_agree\": {:.6f}, \"dp_rms\": {:.8f}, \"clock\": \"exact\", "
        "\"host\": {{\"seconds\": {:.3f}, \"positions_per_second\": {:.1f}, \"threads\": {}, \"clock\": \"host\"}}}}\n",
        o.k, o.v, o.selector, scoring.sparse.budget, scoring.sparse.budget_pages, o.residual_tokens, o.page_tokens, std::min(o.v_group, head_dim), r.predictions, r.ppl, r.reference_ppl, r.ppl_delta_pct, r.kl_mean,
        r.kl_p99, r.kl_max, r.top1_agree, r.dp_rms, seconds, per_second, o.threads);
  } else {
    fmt::print("predictions {}  ppl {:.4f} (f32 KV {:.4f}, {:+.3f}%)  kl_mean {:.6f}  kl_p99 {:.6f}  kl_max {:.6f}  "
               "top1_agree {:.4f}  dp_rms {:.6f}  [clock: exact]\n",
               r.predictions, r.ppl, r.reference_ppl, r.ppl_delta_pct, r.kl_mean, r.kl_p99, r.kl_max, r.top1_agree,
               r.dp_rms);
    fmt::print("scored {} positions in {:.2f} s: {:.0f} positions/s on {} thread{} (tested and reference cache each)  "
               "[clock: host]\n",
               r.predictions, seconds, per_second, o.threads, o.threads == 1 ? "" : "s");
  }
  return 0;
}

}  // namespace kvbench
