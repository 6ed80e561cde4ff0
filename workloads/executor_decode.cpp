// The executor's decode phase (executor.h): plain decode steps, speculative decoding's rounds
// of draft proposals and verify steps, and the llama side's free-running token choices.
#include <algorithm>
#include <stdexcept>

#include "executor.h"
#include "executor_timing.h"

namespace kvbench {

void Executor::run_decode(const Op& op, ExecutionResult& result, ScriptRun& state) {
  if (!seq_) throw std::invalid_argument("script: a decode before any sequence");
  cache_.set_phase(kv::Phase::Decode);
  if (ask_needle_) ask_needle_(op.ask_needle);
  const double dma_before = dma_wait_ms();
  const int decode_start = pos_;
  auto& [ms, steps] = state.decode[op.request];
  for (int done = 0; done < op.tokens;) {
    if (options_.speculative != nullptr && op.tokens - done >= 2) {
      double round_ms = 0.0;
      const int committed = speculative_round(result, op.tokens - done, round_ms);
      ms += round_ms;
      steps += committed;
      done += committed;
    } else {
      ms += decode_step(result);
      ++steps;
      ++done;
    }
  }
  result.decode.dma_wait_ms += (dma_wait_ms() - dma_before) * scale_;
  if (free_running()) result.generated.insert(result.generated.end(), tokens_.begin() + decode_start, tokens_.begin() + pos_);
  if (ask_needle_) ask_needle_(-1);
}

double Executor::decode_step(ExecutionResult& result) {
  // The pending token first: it may be read from the last step's logits, which a draft
  // catch-up step would overwrite.
  if (free_running()) tokens_.push_back(take_pending());
  const double catch_up_ms = draft_seq_ ? draft_catch_up() : 0.0;
  if (result.speculation) result.speculation->draft_ms += catch_up_ms * scale_;
  const LayerTimes t = step(DecodeStep{});
  if (free_running()) pending_ = greedy_token(0);
  account_decode(result, t, catch_up_ms, 1);
  result.decode.quality_ms += t.quality_ms + score(1, free_running());
  ++pos_;
  if (options_.on_step) options_.on_step({kv::Phase::Decode, request_, 1, 1, pos_, -1, copy_share_});
  return (t.append_ms + t.attend_ms + t.model_ms + catch_up_ms) * scale_;
}

void Executor::account_decode(ExecutionResult& result, const LayerTimes& t, double extra_ms, int tokens) {
  const double ms = (t.append_ms + t.attend_ms + t.model_ms + extra_ms) * scale_;
  for (int i = 0; i < tokens; ++i) result.tpot_ms.push_back(ms / tokens);
  result.decode.total_ms += ms;
  result.decode.append_ms += t.append_ms * scale_;
  result.decode.attend_ms += t.attend_ms * scale_;
  result.decode.model_ms += t.model_ms * scale_;
  SpanWork total_work = t.append_work;
  total_work += t.attend_work;
  total_work += t.model_work;
  result.decode.total_work += total_work.scaled(scale_);
  result.decode.append_work += t.append_work.scaled(scale_);
  result.decode.attend_work += t.attend_work.scaled(scale_);
  result.decode.model_work += t.model_work.scaled(scale_);
  result.decode_tokens += tokens;
}

double Executor::draft_step(int token, int* proposal) {
  kv::ModelBackend& model = options_.draft_model != nullptr ? *options_.draft_model : model_;
  const kv::ModelGeometry& g = model.geometry();
  const auto q_row = static_cast<std::size_t>(g.q_heads) * static_cast<std::size_t>(g.head_dim);
  const auto kv_row = static_cast<std::size_t>(g.kv_heads) * static_cast<std::size_t>(g.head_dim);
  buffers_.q.resize(q_row);
  buffers_.k.resize(kv_row);
  buffers_.v.resize(kv_row);
  buffers_.attn.assign(q_row, 0.0f);
  // A layers:N draft writes the target's own sequence, in its first N layers.
  const bool own_copy = options_.speculative->draft_layers == 0;
  kv::KVCache& cache = own_copy ? *options_.draft : cache_;
  const kv::SeqId seq = own_copy ? *draft_seq_ : *seq_;
  const int layers = own_copy ? g.layers : options_.speculative->draft_layers;
  const int position = cache.length(seq, 0);
  // Synthetic: the generator stands in for the model, so only the engine's work is timed; llama:
  // the whole forward pass.
  const auto pass_start = Clock::now();
  model.begin_step(&token, 1, position);
  double ms = 0.0;
  for (int layer = 0; layer < layers; ++layer) {
    model.layer_qkv(layer, buffers_.q.data(), buffers_.k.data(), buffers_.v.data());
    const auto start = Clock::now();
    // Writing the target's own sequence, the draft's calls may enter danger for its policy; the
    // draft's own cache has none to tighten.
    kv::CacheOutcome outcome = cache.append(seq, layer, buffers_.k.data(), buffers_.v.data(), 1);
    if (!own_copy) decoder_.apply(outcome);
    outcome = cache.attend(seq, layer, buffers_.q.data(), 1, buffers_.attn.data());
    if (!own_copy) decoder_.apply(outcome);
    ms += ms_since(start);
    model.layer_output(layer, buffers_.attn.data());
  }
  ms *= options_.draft_layer_ratio;
  if (llama_) {
    llama_->tested->logits();
    if (proposal != nullptr) *proposal = greedy_token(0);
    ms = ms_since(pass_start);
  }
  // Priced like a decode step of the model (kv: the model over its own KV copy; layers:N: its
  // share of the dense work), adding no token: the verify step adds them.
  if (options_.on_step) options_.on_step({kv::Phase::Decode, request_, 1, 1, position + 1, 0, draft_share_});
  return ms;
}

int Executor::draft_length() const { return options_.draft->length(*draft_seq_, 0); }

double Executor::draft_catch_up() {
  double ms = 0.0;
  if (options_.speculative->draft_layers > 0) return ms;  // it reads the target's own pages
  for (int at = draft_length(); at < pos_; ++at) ms += draft_step(tokens_[static_cast<std::size_t>(at)]);
  return ms;
}

int Executor::speculative_round(ExecutionResult& result, int remaining, double& round_ms) {
  const SpeculativeConfig& spec = *options_.speculative;
  const int k = std::min(spec.k, remaining - 1);
  const bool own_copy = spec.draft_layers == 0;
  // The verify step's tokens: the pending token, then the draft's proposals. Synthetic: the
  // script's tokens right up to the first one the target rejects (drawn); llama: the draft's
  // greedy choices.
  std::vector<int> proposal(static_cast<std::size_t>(k) + 1);
  int accepted = 0;
  if (!llama_) {
    accepted = accepted_prefix(accept_rng_, k, spec.accept_rate);
    for (int j = 0; j <= k; ++j) proposal[static_cast<std::size_t>(j)] = j <= accepted ? tokens_[static_cast<std::size_t>(pos_ + j)] : kvbench::rejected_token(pos_ + j);
  } else {
    proposal[0] = take_pending();
  }
  // The draft: the committed tokens it lacks, then k proposals (each step appends one token
  // and attends to propose the next), tentative from the pending token on - in its own copy,
  // or in the target's sequence for a layers:N draft.
  double draft_ms = draft_catch_up();
  if (own_copy) {
    options_.draft->begin_tentative(*draft_seq_);
  } else {
    cache_.begin_tentative(*seq_);
  }
  for (int j = 0; j < k; ++j) {
    draft_ms += draft_step(proposal[static_cast<std::size_t>(j)], llama_ ? &proposal[static_cast<std::size_t>(j) + 1] : nullptr);
  }
  // The verify step: k + 1 tentative tokens in one multi-query attention per layer.
  if (own_copy) cache_.begin_tentative(*seq_);
  const LayerTimes t = step(VerifyStep{proposal.data(), k + 1, spec.draft_layers});
  if (llama_) {
    // Greedy acceptance: the proposals up to the first the target's choice differs from.
    while (accepted < k && greedy_token(accepted) == proposal[static_cast<std::size_t>(accepted) + 1]) ++accepted;
    pending_ = greedy_token(accepted);
  }
  // Both commits (the draft copy's too) are the round's commit and rollback work.
  const auto commit_start = Clock::now();
  cache_.apply_commit(cache_.plan_commit(*seq_, accepted + 1));
  if (own_copy) options_.draft->apply_commit(options_.draft->plan_commit(*draft_seq_, std::min(accepted + 1, k)));
  const double commit_ms = ms_since(commit_start);
  const int committed = accepted + 1;
  double follow_ms = 0.0;
  if (free_running()) {
    tokens_.insert(tokens_.end(), proposal.begin(), proposal.begin() + committed);
    follow_ms = score(committed, true);
  }
  LayerTimes verify = t;
  verify.append_ms += commit_ms;
  account_decode(result, verify, draft_ms, committed);
  result.decode.quality_ms += t.quality_ms + follow_ms;
  SpeculationTotals& totals = *result.speculation;
  ++totals.verify_steps;
  totals.proposed += static_cast<std::uint64_t>(k);
  totals.accepted += static_cast<std::uint64_t>(accepted);
  totals.committed += static_cast<std::uint64_t>(committed);
  totals.draft_ms += draft_ms * scale_;
  totals.verify_ms += (t.append_ms + t.attend_ms + t.model_ms + commit_ms) * scale_;
  pos_ += committed;
  if (options_.on_step) options_.on_step({kv::Phase::Decode, request_, k + 1, k + 1, pos_, committed});
  round_ms = (t.append_ms + t.attend_ms + t.model_ms + commit_ms + draft_ms) * scale_;
  return committed;
}

int Executor::greedy_token(int row) const {
  const std::vector<float>& logits = llama_->tested->last_logits();
  const auto vocab = static_cast<std::size_t>(llama_->tested->vocab_size());
  const auto first = logits.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(row) * vocab);
  return static_cast<int>(std::max_element(first, first + static_cast<std::ptrdiff_t>(vocab)) - first);
}

int Executor::take_pending() {
  if (!pending_) {
    // The prompt's last step chose it: the last row of its logits.
    const auto rows = llama_->tested->last_logits().size() / static_cast<std::size_t>(llama_->tested->vocab_size());
    pending_ = greedy_token(static_cast<int>(rows) - 1);
  }
  const int token = *pending_;
  pending_.reset();
  return token;
}

}  // namespace kvbench
