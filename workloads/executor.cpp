#include "executor.h"

#include <algorithm>
#include <stdexcept>

#include "executor_timing.h"
#include "model/llama_speculative.h"
#include "runtime/error.h"
#include "runtime/work_clock.h"

namespace kvbench {

namespace {

using kv::sim::WorkPart;

// Adds the engine's work since `start` to `work`.
void add_work_since(const kv::WorkStamp& start, SpanWork& work) {
  const kv::WorkStamp d = kv::engine_work() - start;
  work += SpanWork{static_cast<double>(d.cpu_ns) * 1e-6, static_cast<double>(d.instructions)};
}

// Per-query attention time a + b * position, least squares over the probes, both >= 0.
struct LinearCost {
  double a = 0.0, b = 0.0;
  static LinearCost fit(const std::vector<std::pair<double, double>>& samples) {
    LinearCost cost;
    if (samples.empty()) return cost;
    double mx = 0.0, my = 0.0;
    for (const auto& [x, y] : samples) {
      mx += x;
      my += y;
    }
    mx /= static_cast<double>(samples.size());
    my /= static_cast<double>(samples.size());
    double sxx = 0.0, sxy = 0.0;
    for (const auto& [x, y] : samples) {
      sxx += (x - mx) * (x - mx);
      sxy += (x - mx) * (y - my);
    }
    if (samples.size() < 2 || sxx <= 0.0) {
      cost.b = mx > 0.0 ? my / mx : 0.0;  // one probe: proportional to the position
      if (mx <= 0.0) cost.a = my;
      return cost;
    }
    cost.b = std::max(0.0, sxy / sxx);
    cost.a = std::max(0.0, my - cost.b * mx);
    return cost;
  }
  // Sum over queries at positions (first, last], a query at x attending x keys.
  double total(int first, int last) const {
    const double n = last - first;
    const double positions = (static_cast<double>(last) * (last + 1) - static_cast<double>(first) * (first + 1)) / 2.0;
    return a * n + b * positions;
  }
};

}  // namespace

std::vector<kv::ImagePages> image_pages(const Script& script, int page_tokens, int length) {
  std::vector<kv::ImagePages> pages;
  for (const Script::TokenRange& image : script.images) {
    if (image.end > length) break;
    pages.push_back({image.begin / page_tokens, (image.end + page_tokens - 1) / page_tokens});
  }
  return pages;
}

Executor::Executor(kv::ModelBackend& model, kv::KVCache& cache, kv::SparseDecoder& decoder, double layer_scale,
                   std::function<void(int)> ask_needle, std::optional<LlamaRun> llama, ExecutionOptions options)
    : model_(model),
      cache_(cache),
      decoder_(decoder),
      scale_(layer_scale),
      ask_needle_(std::move(ask_needle)),
      llama_(std::move(llama)),
      options_(options) {
  if (llama_ && (llama_->tested == nullptr || llama_->reference == nullptr || llama_->reference_cache == nullptr ||
                 llama_->tokens == nullptr)) {
    throw std::invalid_argument("Executor: an incomplete llama run");
  }
  if (!llama_ && model_.attention_feeds_next_layer()) {
    throw std::invalid_argument("Executor: a backend whose layers need attention runs with its llama side");
  }
  if (options_.prefill_chunk < 1 || options_.probe_queries < 1 || options_.probe_chunks < 2) {
    throw std::invalid_argument("Executor: prefill_chunk and probe_queries must be >= 1, probe_chunks >= 2");
  }
  if (llama_) lockstep_.emplace(*llama_->reference, *llama_->reference_cache);
  if (options_.speculative != nullptr) {
    const int draft_layers = options_.speculative->draft_layers;
    if (draft_layers == 0 && options_.draft == nullptr) throw std::invalid_argument("Executor: a kv draft without its cache");
    if (options_.draft_model != nullptr && (llama_ || options_.draft_model->attention_feeds_next_layer() ||
                                            !(options_.draft_layer_ratio > 0.0))) {
      throw std::invalid_argument("Executor: a draft model of its own runs on the synthetic backend, with a positive layer ratio");
    }
    if (draft_layers > 0 && (!llama_ || options_.draft != nullptr || draft_layers >= model_.geometry().layers)) {
      throw std::invalid_argument("Executor: a layers:N draft runs on the llama backend, over the target's cache, with N below its layers");
    }
    if (options_.speculative->k < 1 || options_.speculative->k + 1 > kv::kMaxVerifyQueries) {
      throw std::invalid_argument("Executor: speculative k must be in [1, kMaxVerifyQueries - 1]");
    }
    accept_rng_.seed(options_.seed);
    if (llama_) source_ = TokenSource::FreeRunning;
    if (draft_layers > 0) draft_share_ = kv::layers_draft_dense_share(llama_->tested->weights().config, draft_layers);
    if (options_.draft_model != nullptr) {
      draft_share_ = options_.draft_model_share;
      copy_share_ = 1.0 + options_.draft_model_share;
    }
  }
}

double Executor::dma_wait_ms() const { return static_cast<double>(cache_.stats().memory.dma_wait_ns) * 1e-6; }

void Executor::new_sequence(const Op& op) {
  if (seq_) {
    cache_.release(*seq_);
    decoder_.forget(*seq_);
  }
  seq_ = cache_.create_sequence();
  if (options_.draft != nullptr) {
    if (draft_seq_) options_.draft->release(*draft_seq_);
    draft_seq_ = options_.draft->create_sequence();
  }
  if (lockstep_) lockstep_->begin_sequence(op.length);
  pos_ = 0;
  next_image_ = 0;
  offset_ = op.stream_offset;
  tokens_.clear();
  pending_.reset();
  prompt_end_ = -1;
}

void Executor::synthetic_tokens(const Op* first, const Op* end, std::vector<int>& out) {
  for (const Op* op = first; op != end; ++op) {
    for (int i = 0; i < op->tokens; ++i) out.push_back(synthetic_token(op->content, op->content_offset + i));
  }
}

int Executor::share_cached_prefix(const Op* first, const Op* end, double& prefix_ms) {
  if (!cache_.config().prefix_cache || llama_) return 0;
  const auto start = Clock::now();
  std::vector<int> prompt;
  synthetic_tokens(first, end, prompt);
  kv::PrefixPlan plan = cache_.lookup_prefix(std::span<const kv::TokenId>(prompt.data(), prompt.size()));
  // The prompt's last token is always computed: its query gives the first output token.
  while (!plan.keys.empty() && plan.tokens() >= static_cast<int>(prompt.size())) plan.keys.pop_back();
  if (plan.pages() > 0) {
    cache_.share_prefix(*seq_, plan);
    model_.reuse_prefix(prompt.data(), plan.tokens());
  }
  prefix_ms += ms_since(start);
  return plan.tokens();
}

void Executor::cache_prompt(double& prefix_ms) {
  if (!cache_.config().prefix_cache || llama_) return;
  const auto start = Clock::now();
  cache_.cache_prefix(*seq_, std::span<const kv::TokenId>(tokens_.data(), static_cast<std::size_t>(pos_)));
  prefix_ms += ms_since(start);
}

template <class Fn, class After>
void Executor::span_part(WorkPart part, double& ms, SpanWork& work, Fn&& fn, After&& after) {
  const auto start = Clock::now();
  const kv::WorkStamp stamp = kv::engine_work();
  if (part == WorkPart::Model && !llama_) {
    fn();
  } else {
    kv::sim::counted(cache_.phase(), part, fn);
  }
  after();
  ms += ms_since(start);
  add_work_since(stamp, work);
}

Executor::LayerTimes Executor::step(const StepMode& mode) {
  if (options_.stop != nullptr && options_.stop->load(std::memory_order_relaxed)) throw ExecutionStopped();
  const auto* prompt = std::get_if<PromptStep>(&mode);
  const auto* verify = std::get_if<VerifyStep>(&mode);
  const int n = prompt != nullptr ? prompt->n : verify != nullptr ? verify->n : 1;
  const int attend = prompt != nullptr ? prompt->attend : n;
  const bool predict = prompt != nullptr && prompt->predict;
  const int shared_layers = verify != nullptr ? verify->shared_layers : 0;
  const kv::ModelGeometry& g = model_.geometry();
  const auto rows = static_cast<std::size_t>(n);
  const auto q_row = static_cast<std::size_t>(g.q_heads) * static_cast<std::size_t>(g.head_dim);
  const auto kv_row = static_cast<std::size_t>(g.kv_heads) * static_cast<std::size_t>(g.head_dim);
  buffers_.q.resize(rows * q_row);
  buffers_.k.resize(rows * kv_row);
  buffers_.v.resize(rows * kv_row);
  buffers_.attn.assign(rows * q_row, 0.0f);
  const int* tokens = verify != nullptr                ? verify->tokens
                      : llama_ && !free_running() ? llama_->tokens->data() + offset_ + pos_
                                                  : tokens_.data() + pos_;
  const bool copy = draft_seq_.has_value() && verify == nullptr;  // the draft's copy takes the step's tokens
  const bool mirror = copy && options_.draft_model == nullptr;  // ... as the target's K/V
  if (copy && draft_length() != pos_) throw std::logic_error("Executor: the draft's copy of the context is not at the target's position");
  LayerTimes t;
  span_part(WorkPart::Model, t.model_ms, t.model_work, [&] { model_.begin_step(tokens, n, pos_); });
  const std::size_t tail = rows - static_cast<std::size_t>(attend);
  // The generator computes only the queries used: the attended ones, and the last for a prediction.
  if (!llama_) model_.skip_query_rows(static_cast<int>(predict ? std::min(tail, rows - 1) : tail));
  for (int layer = 0; layer < g.layers; ++layer) {
    span_part(WorkPart::Model, t.model_ms, t.model_work,
              [&] { model_.layer_qkv(layer, buffers_.q.data(), buffers_.k.data(), buffers_.v.data()); });
    kv::CacheOutcome appended;
    span_part(WorkPart::Append, t.append_ms, t.append_work, [&] {
      // After a layers:N draft its layers hold the proposals' K/V already: the last token's only.
      const std::size_t shared = layer < shared_layers ? rows - 1 : 0;
      appended = cache_.append(*seq_, layer, buffers_.k.data() + shared * kv_row, buffers_.v.data() + shared * kv_row,
                               n - static_cast<int>(shared));
      // The draft's cache has no sparse policy of its own: nothing to tighten.
      if (mirror) options_.draft->append(*draft_seq_, layer, buffers_.k.data(), buffers_.v.data(), n);
    });
    decoder_.apply(appended);  // appending may have entered danger: before anything plans
    // Before the layer's prompt attention: the prompt's last query scores the pages for the
    // first decode step from their key bounds alone, so the pages it predicts, which the
    // attention streams through L1 anyway, stay there.
    if (predict) {
      const auto start = Clock::now();
      decoder_.predict_next(*seq_, layer, buffers_.q.data() + (rows - 1) * q_row);
      t.predict_ms += ms_since(start);
    }
    if (attend == 0) continue;
    const std::uint64_t serial_start = kv::serial_cpu_ns();
    kv::CacheOutcome attended;  // a dense call's: the decoder applies its own calls'
    span_part(WorkPart::Attend, t.attend_ms, t.attend_work, [&] {
      if (options_.test_slowdown > 0.0) cache_.pool().set_work_inflation(options_.test_slowdown);
      if (n == 1) {
        decoder_.attend(*seq_, layer, buffers_.q.data(), buffers_.attn.data());
      } else if (decoder_.policy().sparse_prefill) {
        decoder_.prefill(*seq_, layer, buffers_.q.data() + tail * q_row, attend, buffers_.attn.data() + tail * q_row);
      } else {
        attended = cache_.attend(*seq_, layer, buffers_.q.data() + tail * q_row, attend, buffers_.attn.data() + tail * q_row);
      }
    }, [&] {
      if (options_.test_slowdown <= 0.0) return;
      // The pool inflated its items; the calling thread's own part is inflated here, timed but
      // never counted (its size follows the CPU clock).
      cache_.pool().set_work_inflation(0.0);
      kv::burn_cpu_ns(static_cast<std::uint64_t>(static_cast<double>(kv::serial_cpu_ns() - serial_start) * options_.test_slowdown));
    });
    decoder_.apply(attended);
    if (n == 1 && options_.quality != nullptr) {  // outside the timed region: the check costs far more than the step
      const auto start = Clock::now();
      if (options_.quality->check(cache_, decoder_, buffers_.q.data(), buffers_.attn.data())) t.quality_ms += ms_since(start);
    }
    span_part(WorkPart::Model, t.model_ms, t.model_work, [&] { model_.layer_output(layer, buffers_.attn.data()); });
  }
  if (!llama_) model_.skip_query_rows(0);
  if (copy && !mirror) {
    // A preset draft's own K/V for the step's tokens: its generator, no attention.
    double draft_ms = 0.0;
    SpanWork draft_work;
    span_part(WorkPart::Append, draft_ms, draft_work, [&] {
      kv::ModelBackend& draft = *options_.draft_model;
      const kv::ModelGeometry& dg = draft.geometry();
      const auto dq_row = static_cast<std::size_t>(dg.q_heads) * static_cast<std::size_t>(dg.head_dim);
      const auto dkv_row = static_cast<std::size_t>(dg.kv_heads) * static_cast<std::size_t>(dg.head_dim);
      draft_q_.resize(rows * dq_row);
      draft_k_.resize(rows * dkv_row);
      draft_v_.resize(rows * dkv_row);
      draft.begin_step(tokens, n, pos_);
      draft.skip_query_rows(n);
      for (int layer = 0; layer < dg.layers; ++layer) {
        draft.layer_qkv(layer, draft_q_.data(), draft_k_.data(), draft_v_.data());
        options_.draft->append(*draft_seq_, layer, draft_k_.data(), draft_v_.data(), n);
      }
      draft.skip_query_rows(0);
    });
    t.append_ms += draft_ms * options_.draft_layer_ratio;
    t.append_work += draft_work.scaled(options_.draft_layer_ratio);
  }
  if (n == 1 || verify != nullptr) decoder_.end_step();  // a one-token prompt chunk attended as a decode step
  if (llama_) {
    span_part(WorkPart::Model, t.model_ms, t.model_work, [&] { llama_->tested->logits(); });
  } else {
    t.model_ms = 0.0;  // the generator stands in for the model: not counted
    t.model_work = {};
  }
  return t;
}

// The lockstep reference on the same tokens, and its scoring. Not timed.
double Executor::score(int n, bool follow) {
  if (!lockstep_) return 0.0;
  const auto start = Clock::now();
  if (follow) {
    lockstep_->follow(tokens_.data() + pos_, n, pos_);
  } else {
    lockstep_->score(llama_->tokens->data() + offset_ + pos_, n, pos_, llama_->tested->last_logits());
  }
  return ms_since(start);
}


void Executor::run_prefill(const Op& op, ExecutionResult& result, double& request_ttft, bool before_decode) {
  cache_.set_phase(kv::Phase::Prefill);
  const double dma_before = dma_wait_ms();
  const int chunk = options_.prefill_chunk;
  const int chunks = (op.tokens + chunk - 1) / chunk;
  const bool probe = !llama_ && pos_ + op.tokens > options_.full_prefill_positions;
  const int first = pos_;
  std::vector<std::pair<double, double>> samples;  // (position, attend ms per query)
  std::vector<std::pair<double, double>> cpu_samples, instruction_samples;  // likewise, per query
  bool partial = false;
  double append_ms = 0.0, attend_ms = 0.0, model_ms = 0.0, quality_ms = 0.0, predict_ms = 0.0;
  SpanWork append_work, attend_work, model_work;
  // Probed chunks: evenly spread from the first to the last that can time the prefill kernel.
  // A last chunk of kMaxVerifyQueries tokens or fewer would time the multi-query decode, several
  // times dearer per query, at the highest position: it is fitted, never a probe.
  const bool short_last = chunks > 1 && op.tokens - (chunks - 1) * chunk <= kv::kMaxVerifyQueries;
  const int probe_end = short_last ? chunks - 2 : chunks - 1;
  std::vector<bool> probed(static_cast<std::size_t>(chunks), probe_end + 1 <= options_.probe_chunks);
  if (short_last) probed.back() = false;
  for (int j = 0; j < options_.probe_chunks && probe_end + 1 > options_.probe_chunks; ++j) {
    probed[static_cast<std::size_t>(j * probe_end / (options_.probe_chunks - 1))] = true;
  }
  for (int c = 0; c < chunks; ++c) {
    const int n = std::min(chunk, op.tokens - c * chunk);
    int attend = n;
    if (probe) {
      attend = probed[static_cast<std::size_t>(c)] ? std::min(n, options_.probe_queries) : 0;
      if (attend < n) partial = true;
    }
    const LayerTimes t = step(PromptStep{n, attend, before_decode && c == chunks - 1});
    predict_ms += t.predict_ms;
    append_ms += t.append_ms;
    model_ms += t.model_ms;
    attend_ms += t.attend_ms;
    append_work += t.append_work;
    model_work += t.model_work;
    attend_work += t.attend_work;
    if (attend > 0) {
      samples.emplace_back(static_cast<double>(pos_ + n), t.attend_ms / attend);
      cpu_samples.emplace_back(static_cast<double>(pos_ + n), t.attend_work.cpu_ms / attend);
      instruction_samples.emplace_back(static_cast<double>(pos_ + n), t.attend_work.instructions / attend);
    }
    quality_ms += t.quality_ms + score(n);
    pos_ += n;
    if (options_.on_step) options_.on_step({kv::Phase::Prefill, request_, n, attend, pos_, -1, copy_share_});
  }
  if (partial) {
    attend_ms = LinearCost::fit(samples).total(first, pos_);
    attend_work = {LinearCost::fit(cpu_samples).total(first, pos_), LinearCost::fit(instruction_samples).total(first, pos_)};
    result.prefill_probed = true;
  }
  attend_ms += predict_ms;  // measured, never fitted: it runs once, at the end
  const double total = (append_ms + attend_ms + model_ms) * scale_;
  request_ttft += total;
  result.prefill.total_ms += total;
  result.prefill.append_ms += append_ms * scale_;
  result.prefill.attend_ms += attend_ms * scale_;
  result.prefill.model_ms += model_ms * scale_;
  result.prefill.dma_wait_ms += (dma_wait_ms() - dma_before) * scale_;
  result.prefill.quality_ms += quality_ms;
  SpanWork total_work = append_work;
  total_work += attend_work;
  total_work += model_work;
  result.prefill.total_work += total_work.scaled(scale_);
  result.prefill.append_work += append_work.scaled(scale_);
  result.prefill.attend_work += attend_work.scaled(scale_);
  result.prefill.model_work += model_work.scaled(scale_);
  result.prefill_tokens += op.tokens;
}

const Op* Executor::op_group_end(const Op* first, const Op* ops_end) {
  const Op* group_end = first + 1;
  if (first->kind == OpKind::Prefill) {
    while (group_end != ops_end && group_end->kind == OpKind::Prefill && group_end->joins_previous) ++group_end;
  }
  return group_end;
}

Op Executor::enter_op(const Op* first, const Op* end) {
  Op op = *first;
  for (const Op* g = first + 1; g != end; ++g) op.tokens += g->tokens;
  if (options_.on_request && op.kind != OpKind::NewSequence && op.request != request_) options_.on_request(op.request);
  request_ = op.request;
  if (!llama_ && op.kind != OpKind::NewSequence) synthetic_tokens(first, end, tokens_);
  if (free_running() && op.kind == OpKind::Prefill) {
    // Prompts come from the text, at the positions they take in the sequence.
    pending_.reset();
    const int* text = llama_->tokens->data() + offset_ + static_cast<std::ptrdiff_t>(tokens_.size());
    tokens_.insert(tokens_.end(), text, text + op.tokens);
  }
  return op;
}

void Executor::run_prompt(const Script& script, const Op& op, const Op* first, const Op* group_end, const Op* ops_end,
                          ExecutionResult& result, ScriptRun& state) {
  if (!seq_) throw std::invalid_argument("script: a prefill before any sequence");
  const Op* prompt_end = first;
  while (prompt_end != ops_end && prompt_end->kind == OpKind::Prefill) ++prompt_end;
  double prefix_ms = 0.0;
  if (pos_ == 0 && prompt_end_ < 0) {  // a sequence's first prompt
    state.skip = share_cached_prefix(first, prompt_end, prefix_ms);
    int tokens = 0;
    for (const Op* p = first; p != prompt_end; ++p) tokens += p->tokens;
    state.prompts[op.request] = {tokens, state.skip};
    pos_ = state.skip;
  }
  Op rest = op;
  const int skipped = std::min(state.skip, op.tokens);
  rest.tokens -= skipped;
  state.skip -= skipped;
  const bool before_decode = prompt_end == group_end && prompt_end != ops_end && prompt_end->kind == OpKind::Decode;
  // With a visual block the cache knows an image's pages before they seal (read-only).
  const bool visual = op.visual && decoder_.policy().visual.enabled();
  if (visual) {
    if (next_image_ >= script.images.size()) throw std::invalid_argument("script: more image prefills than images");
    const Script::TokenRange& image = script.images[next_image_++];
    cache_.add_image(*seq_, image.begin, image.end);
  }
  if (ask_needle_ && op.ask_needle >= 0) ask_needle_(op.ask_needle);  // a question's prompt asks it
  double& request_ttft = state.ttft[op.request];  // a request whose prompt all came from the cache still has one
  if (rest.tokens > 0) run_prefill(rest, result, request_ttft, before_decode);
  if (ask_needle_ && op.ask_needle >= 0) ask_needle_(-1);
  // An image's prefill has ended: its pages are selected per image.
  if (visual) decoder_.set_images(*seq_, image_pages(script, cache_.config().page_tokens, pos_));
  if (prompt_end == group_end && prompt_end_ < 0) {
    prompt_end_ = pos_;
    cache_prompt(prefix_ms);
  }
  const double scaled = prefix_ms * scale_;
  state.ttft[op.request] += scaled;
  result.prefill.prefix_ms += scaled;
  result.prefill.total_ms += scaled;
}

void Executor::end_sequences(ExecutionResult& result) {
  if (seq_) {
    cache_.release(*seq_);
    decoder_.forget(*seq_);
    seq_.reset();
  }
  if (draft_seq_) {
    result.speculation->draft_peak_bytes =
        static_cast<std::size_t>(static_cast<double>(options_.draft->stats().peak_sealed_bytes) * options_.draft_layer_ratio);
    options_.draft->release(*draft_seq_);
    draft_seq_.reset();
  }
  if (lockstep_) lockstep_->end_sequence();
}

void Executor::report_requests(const ScriptRun& state, ExecutionResult& result) {
  for (const auto& [request, ms] : state.ttft) {
    result.ttft_ms.push_back(ms);
    result.request_of_ttft.push_back(request);
    const auto prompt = state.prompts.find(request);
    result.prompt_tokens.push_back(prompt == state.prompts.end() ? 0 : prompt->second.first);
    result.prefix_hit_tokens.push_back(prompt == state.prompts.end() ? 0 : prompt->second.second);
  }
  for (const auto& [request, entry] : state.decode) {
    result.request_tpot_ms.push_back(entry.second > 0 ? entry.first / entry.second : 0.0);
    result.request_of_tpot.push_back(request);
  }
}

ExecutionResult Executor::run(const Script& script) {
  ExecutionResult result;
  result.layer_scale = scale_;
  result.repeat_requests = script.repeat_requests;
  result.sessions = script.sessions;
  if (options_.speculative != nullptr) result.speculation.emplace();
  ScriptRun state;
  const Op* const ops_end = script.ops.data() + script.ops.size();
  for (const Op* it = script.ops.data(); it != ops_end; ++it) {
    const Op* const group_end = op_group_end(it, ops_end);
    const Op op = enter_op(it, group_end);
    switch (op.kind) {
      case OpKind::NewSequence:
        new_sequence(op);
        break;
      case OpKind::Prefill:
        run_prompt(script, op, it, group_end, ops_end, result, state);
        break;
      case OpKind::Decode:
        run_decode(op, result, state);
        break;
    }
    it = group_end - 1;  // the loop goes on after the group
  }
  end_sequences(result);
  report_requests(state, result);
  result.extrapolated = scale_ != 1.0 || result.prefill_probed;
  if (lockstep_) result.accuracy = lockstep_->report();
  return result;
}

}  // namespace kvbench
