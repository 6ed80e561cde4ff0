#include "model/llama_model.h"

#include <algorithm>
#include <cmath>

#include "runtime/error.h"

namespace kv {

namespace {

void rmsnorm(float* out, const float* x, const float* weight, int dim, float eps) {
  float ss = 0.0f;
  for (int i = 0; i < dim; ++i) ss += x[i] * x[i];
  ss = 1.0f / std::sqrt(ss / static_cast<float>(dim) + eps);
  for (int i = 0; i < dim; ++i) out[i] = weight[i] * (ss * x[i]);
}

// Work below this many multiply-adds stays on the calling thread: the tiny model's 64x64
// products are faster without a hand-off.
constexpr std::size_t kParallelMacs = 1 << 16;

}  // namespace

LlamaModel::LlamaModel(std::shared_ptr<const LlamaWeights> weights, int max_seq, ThreadPool& pool)
    : weights_(std::move(weights)), pool_(pool) {
  const LlamaConfig& c = weights_->config;
  geometry_ = {c.layers, c.heads, c.kv_heads, c.head_dim(), max_seq};
  const int half = c.head_dim() / 2;
  rope_freq_.resize(static_cast<std::size_t>(half));
  for (int i = 0; i < half; ++i) {
    rope_freq_[static_cast<std::size_t>(i)] =
        1.0f / std::pow(c.rope_theta, static_cast<float>(2 * i) / static_cast<float>(c.head_dim()));
  }
}

void LlamaModel::matmul(const float* x, int n, const float* w, int out_dim, int in_dim, float* y) {
  // y[t][i] = sum_j w[i][j] x[t][j]
  auto rows = [&](std::size_t begin, std::size_t end) {
    for (int t = 0; t < n; ++t) {
      const float* xt = x + static_cast<std::size_t>(t) * in_dim;
      float* yt = y + static_cast<std::size_t>(t) * out_dim;
      for (std::size_t i = begin; i < end; ++i) {
        const float* wi = w + i * static_cast<std::size_t>(in_dim);
        float sum = 0.0f;
        for (int j = 0; j < in_dim; ++j) sum += wi[j] * xt[j];
        yt[i] = sum;
      }
    }
  };
  const std::size_t macs = static_cast<std::size_t>(n) * out_dim * in_dim;
  if (macs < kParallelMacs || pool_.size() == 1) {
    rows(0, static_cast<std::size_t>(out_dim));
    return;
  }
  const std::size_t tasks = static_cast<std::size_t>(pool_.size()) * 4;
  const std::size_t per = (static_cast<std::size_t>(out_dim) + tasks - 1) / tasks;
  pool_.parallel_for(tasks, [&](std::size_t task) {
    const std::size_t begin = task * per;
    rows(std::min(begin, static_cast<std::size_t>(out_dim)), std::min(begin + per, static_cast<std::size_t>(out_dim)));
  });
}

void LlamaModel::rope(float* vec, int heads, int pos) const {
  // Adjacent pairs (2i, 2i+1) of each head rotate by pos * theta^(-2i/head_dim).
  const int head_dim = geometry_.head_dim;
  for (int h = 0; h < heads; ++h) {
    float* v = vec + static_cast<std::size_t>(h) * head_dim;
    for (int i = 0; i < head_dim / 2; ++i) {
      const float angle = static_cast<float>(pos) * rope_freq_[static_cast<std::size_t>(i)];
      const float c = std::cos(angle), s = std::sin(angle);
      const float a = v[2 * i], b = v[2 * i + 1];
      v[2 * i] = a * c - b * s;
      v[2 * i + 1] = a * s + b * c;
    }
  }
}

void LlamaModel::begin_step(const int* tokens, int n_tokens, int pos) {
  const LlamaConfig& c = weights_->config;
  n_ = n_tokens;
  pos_ = pos;
  const auto n = static_cast<std::size_t>(n_tokens);
  x_.resize(n * c.dim);
  xb_.resize(n * c.dim);
  xb2_.resize(n * c.dim);
  hb_.resize(n * c.hidden_dim);
  hb2_.resize(n * c.hidden_dim);
  for (int t = 0; t < n_tokens; ++t) {
    if (tokens[t] < 0 || tokens[t] >= c.vocab_size) {
      throw InputError("LlamaModel", "token", std::to_string(tokens[t]) + " is outside the vocabulary");
    }
    std::copy_n(weights_->token_embedding.data() + static_cast<std::size_t>(tokens[t]) * c.dim, c.dim,
                x_.data() + static_cast<std::size_t>(t) * c.dim);
  }
}

void LlamaModel::layer_qkv(int layer, float* q, float* k, float* v) {
  const LlamaConfig& c = weights_->config;
  const auto l = static_cast<std::size_t>(layer);
  const std::size_t dim = static_cast<std::size_t>(c.dim), kv_dim = static_cast<std::size_t>(c.kv_dim());
  for (int t = 0; t < n_; ++t) {
    rmsnorm(xb_.data() + t * dim, x_.data() + t * dim, weights_->rms_att.data() + l * dim, c.dim, c.norm_eps);
  }
  matmul(xb_.data(), n_, weights_->wq.data() + l * dim * dim, c.dim, c.dim, q);
  matmul(xb_.data(), n_, weights_->wk.data() + l * kv_dim * dim, c.kv_dim(), c.dim, k);
  matmul(xb_.data(), n_, weights_->wv.data() + l * kv_dim * dim, c.kv_dim(), c.dim, v);
  for (int t = 0; t < n_; ++t) {
    rope(q + t * dim, c.heads, pos_ + t);
    rope(k + t * kv_dim, c.kv_heads, pos_ + t);
  }
}

void LlamaModel::layer_output(int layer, const float* attn) {
  const LlamaConfig& c = weights_->config;
  const auto l = static_cast<std::size_t>(layer);
  const std::size_t dim = static_cast<std::size_t>(c.dim), hidden = static_cast<std::size_t>(c.hidden_dim);
  matmul(attn, n_, weights_->wo.data() + l * dim * dim, c.dim, c.dim, xb2_.data());
  for (std::size_t i = 0; i < x_.size(); ++i) x_[i] += xb2_[i];
  for (int t = 0; t < n_; ++t) {
    rmsnorm(xb_.data() + t * dim, x_.data() + t * dim, weights_->rms_ffn.data() + l * dim, c.dim, c.norm_eps);
  }
  matmul(xb_.data(), n_, weights_->w1.data() + l * hidden * dim, c.hidden_dim, c.dim, hb_.data());
  matmul(xb_.data(), n_, weights_->w3.data() + l * hidden * dim, c.hidden_dim, c.dim, hb2_.data());
  for (std::size_t i = 0; i < hb_.size(); ++i) {
    const float gate = hb_[i];
    hb_[i] = gate / (1.0f + std::exp(-gate)) * hb2_[i];  // SwiGLU: silu(w1 x) * w3 x
  }
  matmul(hb_.data(), n_, weights_->w2.data() + l * dim * hidden, c.dim, c.hidden_dim, xb2_.data());
  for (std::size_t i = 0; i < x_.size(); ++i) x_[i] += xb2_[i];
}

const std::vector<float>& LlamaModel::logits() {
  const LlamaConfig& c = weights_->config;
  const auto dim = static_cast<std::size_t>(c.dim);
  for (int t = 0; t < n_; ++t) {
    rmsnorm(xb_.data() + t * dim, x_.data() + t * dim, weights_->rms_final.data(), c.dim, c.norm_eps);
  }
  logits_.resize(static_cast<std::size_t>(n_) * c.vocab_size);
  matmul(xb_.data(), n_, weights_->wcls.data(), c.vocab_size, c.dim, logits_.data());
  return logits_;
}

std::vector<int> generate_greedy(LlamaModel& model, KVCache& cache, const std::vector<int>& prompt, int steps) {
  if (prompt.empty()) throw InputError("generate_greedy", "prompt", "needs at least one token (BOS)");
  const SeqId seq = cache.create_sequence();
  StepBuffers buffers;
  std::vector<int> out;
  int token = prompt[0];
  for (int pos = 0; pos < steps; ++pos) {
    run_step(model, cache, seq, &token, 1, pos, buffers);
    int next;
    if (pos + 1 < static_cast<int>(prompt.size())) {
      next = prompt[static_cast<std::size_t>(pos) + 1];
    } else {
      const auto& logits = model.logits();
      next = static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    }
    if (next == 1) break;
    out.push_back(next);
    token = next;
  }
  cache.release(seq);
  return out;
}

}  // namespace kv
