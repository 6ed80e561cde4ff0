#include "model/llama_speculative.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "attention/paged_attention.h"
#include "runtime/error.h"

namespace kv {

namespace {

int argmax(const float* logits, int vocab) { return static_cast<int>(std::max_element(logits, logits + vocab) - logits); }

void softmax(const float* logits, int vocab, float temperature, std::vector<float>& p) {
  p.resize(static_cast<std::size_t>(vocab));
  const float top = *std::max_element(logits, logits + vocab);
  double sum = 0.0;
  for (int i = 0; i < vocab; ++i) {
    p[static_cast<std::size_t>(i)] = std::exp((logits[i] - top) / temperature);
    sum += p[static_cast<std::size_t>(i)];
  }
  for (float& x : p) x = static_cast<float>(x / sum);
}

template <typename T>
int draw(const std::vector<T>& p, std::mt19937_64& rng) {
  double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  for (std::size_t i = 0; i < p.size(); ++i) {
    u -= static_cast<double>(p[i]);
    if (u < 0.0) return static_cast<int>(i);
  }
  // Rounding left u a hair above the total: the last token with any mass.
  for (std::size_t i = p.size(); i-- > 0;) {
    if (p[i] > 0) return static_cast<int>(i);
  }
  return 0;
}

// One speculative generation: the target's sequence, the draft's copy (kv), and the passes
// that write them.
class SpeculativeRun {
 public:
  SpeculativeRun(LlamaModel& model, KVCache& cache, const LlamaDraft& draft, const SpeculativeSampling& sampling)
      : model_(model), cache_(cache), draft_(draft), sampling_(sampling), rng_(sampling.seed) {
    seq_ = cache_.create_sequence();
    if (draft_.kind == LlamaDraft::Kind::Kv) draft_seq_ = draft_.cache->create_sequence();
  }
  ~SpeculativeRun() {
    cache_.release(seq_);
    if (draft_.kind == LlamaDraft::Kind::Kv) draft_.cache->release(draft_seq_);
  }
  SpeculativeRun(const SpeculativeRun&) = delete;
  SpeculativeRun& operator=(const SpeculativeRun&) = delete;

  std::vector<int> generate(const std::vector<int>& prompt, int steps, int k, SpeculativeDecodeStats& stats);

 private:
  // n tokens at pos through the first `layers` layers over (cache, seq); in the layers below
  // `shared`, only the last row is appended (the draft already wrote the others). `mirror`:
  // the draft's copy takes the same K/V. Returns the logits of the n rows.
  const std::vector<float>& forward(const int* tokens, int n, int pos, int layers, KVCache& cache, SeqId seq,
                                    int shared, bool mirror);
  // A token from logits (greedy or sampled); `p` receives the distribution when sampling.
  int choose(const float* logits, std::vector<float>* p);
  // The draft's copy takes the committed tokens it lacks, one draft pass each.
  void catch_up(SpeculativeDecodeStats& stats);
  int draft_length() const { return draft_.cache->length(draft_seq_, 0); }

  LlamaModel& model_;
  KVCache& cache_;
  const LlamaDraft& draft_;
  SpeculativeSampling sampling_;
  std::mt19937_64 rng_;
  SeqId seq_ = 0;
  SeqId draft_seq_ = 0;
  StepBuffers buffers_;
  std::vector<int> history_;  // the committed tokens by position
};

const std::vector<float>& SpeculativeRun::forward(const int* tokens, int n, int pos, int layers, KVCache& cache,
                                                  SeqId seq, int shared, bool mirror) {
  const ModelGeometry& g = model_.geometry();
  const auto q_row = static_cast<std::size_t>(g.q_heads) * static_cast<std::size_t>(g.head_dim);
  const auto kv_row = static_cast<std::size_t>(g.kv_heads) * static_cast<std::size_t>(g.head_dim);
  const auto rows = static_cast<std::size_t>(n);
  buffers_.q.resize(rows * q_row);
  buffers_.k.resize(rows * kv_row);
  buffers_.v.resize(rows * kv_row);
  buffers_.attn.resize(rows * q_row);
  model_.begin_step(tokens, n, pos);
  for (int layer = 0; layer < layers; ++layer) {
    model_.layer_qkv(layer, buffers_.q.data(), buffers_.k.data(), buffers_.v.data());
    const std::size_t first = layer < shared ? rows - 1 : 0;
    cache.append(seq, layer, buffers_.k.data() + first * kv_row, buffers_.v.data() + first * kv_row,
                 static_cast<int>(rows - first));
    if (mirror) draft_.cache->append(draft_seq_, layer, buffers_.k.data(), buffers_.v.data(), n);
    cache.attend(seq, layer, buffers_.q.data(), n, buffers_.attn.data());
    model_.layer_output(layer, buffers_.attn.data());
  }
  return model_.logits();
}

int SpeculativeRun::choose(const float* logits, std::vector<float>* p) {
  const int vocab = model_.vocab_size();
  if (sampling_.temperature <= 0.0f) return argmax(logits, vocab);
  std::vector<float> local;
  std::vector<float>& dist = p != nullptr ? *p : local;
  softmax(logits, vocab, sampling_.temperature, dist);
  return draw(dist, rng_);
}

void SpeculativeRun::catch_up(SpeculativeDecodeStats& stats) {
  if (draft_.kind != LlamaDraft::Kind::Kv) return;
  const int layers = model_.geometry().layers;
  for (int at = draft_length(); at < static_cast<int>(history_.size()); ++at) {
    forward(&history_[static_cast<std::size_t>(at)], 1, at, layers, *draft_.cache, draft_seq_, 0, false);
    ++stats.draft_steps;
  }
}

std::vector<int> SpeculativeRun::generate(const std::vector<int>& prompt, int steps, int k, SpeculativeDecodeStats& stats) {
  const int layers = model_.geometry().layers;
  const int vocab = model_.vocab_size();
  const bool kv_draft = draft_.kind == LlamaDraft::Kind::Kv;
  std::vector<int> out;
  int token = prompt[0];
  int pos = 0;
  std::vector<int> proposal;
  std::vector<std::vector<float>> draft_p(static_cast<std::size_t>(k));
  std::vector<float> target_p;
  while (pos < steps) {
    const bool in_prompt = pos + 1 < static_cast<int>(prompt.size());
    const int k_round = std::min(k, steps - pos - 1);
    if (in_prompt || k_round == 0) {
      // A plain step: the prompt's tokens, or the last position. The draft's copy takes its K/V.
      catch_up(stats);
      const std::vector<float>& logits = forward(&token, 1, pos, layers, cache_, seq_, 0, kv_draft);
      history_.push_back(token);
      ++pos;
      const int next = in_prompt ? prompt[static_cast<std::size_t>(pos)] : choose(logits.data(), nullptr);
      if (next == 1) break;
      out.push_back(next);
      token = next;
      continue;
    }
    // The draft proposes k_round tokens after the pending one, each tentative in its sequence.
    proposal.assign(1, token);
    if (kv_draft) {
      catch_up(stats);
      draft_.cache->begin_tentative(draft_seq_);
    } else {
      cache_.begin_tentative(seq_);
    }
    for (int j = 0; j < k_round; ++j) {
      const std::vector<float>& logits =
          kv_draft ? forward(&proposal[static_cast<std::size_t>(j)], 1, pos + j, layers, *draft_.cache, draft_seq_, 0, false)
                   : forward(&proposal[static_cast<std::size_t>(j)], 1, pos + j, draft_.layers, cache_, seq_, 0, false);
      proposal.push_back(choose(logits.data(), &draft_p[static_cast<std::size_t>(j)]));
      ++stats.draft_steps;
    }
    // The target verifies the pending token and the proposals in one step of k_round + 1 queries.
    if (kv_draft) cache_.begin_tentative(seq_);
    const std::vector<float>& logits = forward(proposal.data(), k_round + 1, pos, layers, cache_, seq_,
                                               kv_draft ? 0 : draft_.layers, false);
    int accepted = 0;
    int next = 0;
    for (;; ++accepted) {
      const float* row = logits.data() + static_cast<std::size_t>(accepted) * static_cast<std::size_t>(vocab);
      if (sampling_.temperature <= 0.0f) {
        next = argmax(row, vocab);
        if (accepted == k_round || next != proposal[static_cast<std::size_t>(accepted) + 1]) break;
        continue;
      }
      softmax(row, vocab, sampling_.temperature, target_p);
      if (accepted == k_round) {
        next = draw(target_p, rng_);
        break;
      }
      const int x = proposal[static_cast<std::size_t>(accepted) + 1];
      const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
      if (u >= speculative_accept_probability(target_p, draft_p[static_cast<std::size_t>(accepted)], x)) {
        next = draw(speculative_residual(target_p, draft_p[static_cast<std::size_t>(accepted)]), rng_);
        break;
      }
    }
    // Plans first, then apply: the target keeps the pending token and the accepted proposals;
    // the draft's copy keeps those of its proposals' inputs that were committed.
    cache_.apply_commit(cache_.plan_commit(seq_, accepted + 1));
    if (kv_draft) draft_.cache->apply_commit(draft_.cache->plan_commit(draft_seq_, std::min(accepted + 1, k_round)));
    ++stats.verify_steps;
    stats.proposed += static_cast<std::uint64_t>(k_round);
    stats.accepted += static_cast<std::uint64_t>(accepted);
    stats.committed += static_cast<std::uint64_t>(accepted) + 1;
    for (int j = 0; j <= accepted; ++j) history_.push_back(proposal[static_cast<std::size_t>(j)]);
    pos += accepted + 1;
    proposal.push_back(0);
    proposal[static_cast<std::size_t>(accepted) + 1] = next;
    for (int j = 1; j <= accepted + 1; ++j) {
      const int emitted = proposal[static_cast<std::size_t>(j)];
      if (emitted == 1) return out;
      out.push_back(emitted);
    }
    token = next;
  }
  return out;
}

}  // namespace

std::vector<int> generate_speculative(LlamaModel& model, KVCache& cache, const LlamaDraft& draft,
                                      const std::vector<int>& prompt, int steps, int k, SpeculativeDecodeStats* stats,
                                      const SpeculativeSampling& sampling) {
  const ModelGeometry& g = model.geometry();
  if (prompt.empty()) throw InputError("generate_speculative", "prompt", "needs at least one token (BOS)");
  if (k < 1 || k + 1 > kMaxVerifyQueries) {
    throw InputError("generate_speculative", "k", std::to_string(k) + " is outside [1, " + std::to_string(kMaxVerifyQueries - 1) + "]");
  }
  if (!(sampling.temperature >= 0.0f) || !std::isfinite(sampling.temperature)) {
    throw InputError("generate_speculative", "temperature", "must be a finite number >= 0");
  }
  if (draft.kind == LlamaDraft::Kind::Layers && (draft.layers < 1 || draft.layers >= g.layers)) {
    throw InputError("generate_speculative", "draft", "layers:" + std::to_string(draft.layers) + " is outside [1, " +
                                                           std::to_string(g.layers - 1) + "] for a model of " +
                                                           std::to_string(g.layers) + " layers");
  }
  if (draft.kind == LlamaDraft::Kind::Kv) {
    if (draft.cache == nullptr || draft.cache == &cache) {
      throw InputError("generate_speculative", "draft", "kv needs a cache of its own for the draft's copy of the context");
    }
    const ModelGeometry& d = draft.cache->config().geometry;
    if (d.layers != g.layers || d.kv_heads != g.kv_heads || d.head_dim != g.head_dim || d.q_heads != g.q_heads) {
      throw InputError("generate_speculative", "draft", "the draft's cache has another geometry than the model");
    }
  }
  SpeculativeDecodeStats local;
  SpeculativeRun run(model, cache, draft, sampling);
  return run.generate(prompt, steps, k, stats != nullptr ? *stats : local);
}

double layers_draft_dense_share(const LlamaConfig& c, int layers) {
  const double dim = c.dim, kv_dim = c.kv_dim();
  const double per_layer = 2.0 * dim * dim + 2.0 * dim * kv_dim + 3.0 * dim * c.hidden_dim;
  const double head = static_cast<double>(c.vocab_size) * dim;
  return (layers * per_layer + head) / (c.layers * per_layer + head);
}

double speculative_accept_probability(const std::vector<float>& p_target, const std::vector<float>& p_draft, int x) {
  const auto i = static_cast<std::size_t>(x);
  if (p_draft[i] <= 0.0f) return 1.0;  // a token the draft could not draw: never asked
  return std::min(1.0, static_cast<double>(p_target[i]) / static_cast<double>(p_draft[i]));
}

std::vector<double> speculative_residual(const std::vector<float>& p_target, const std::vector<float>& p_draft) {
  std::vector<double> r(p_target.size());
  double sum = 0.0;
  for (std::size_t i = 0; i < r.size(); ++i) {
    r[i] = std::max(0.0, static_cast<double>(p_target[i]) - static_cast<double>(p_draft[i]));
    sum += r[i];
  }
  if (sum <= 0.0) {
    // The draft matched the target: a rejection cannot happen; the target's own distribution.
    for (std::size_t i = 0; i < r.size(); ++i) r[i] = p_target[i];
    return r;
  }
  for (double& x : r) x /= sum;
  return r;
}

}  // namespace kv
