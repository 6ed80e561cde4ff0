#include "model/llama_model.h"

#include <algorithm>
#include <cmath>

#include "attention/attention_ref.h"
#include "model/dense.h"
#include "runtime/error.h"

namespace kv {

namespace {

void rmsnorm(float* out, const float* x, const float* weight, int dim, float eps) {
  float ss = 0.0f;
  for (int i = 0; i < dim; ++i) ss += x[i] * x[i];
  ss = 1.0f / std::sqrt(ss / static_cast<float>(dim) + eps);
  for (int i = 0; i < dim; ++i) out[i] = weight[i] * (ss * x[i]);
}

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

void LlamaModel::matmul(const float* x, int n, const DenseMatrix& w, std::size_t layer, int out_dim, float* y) {
  dense(pool_, x, n, w.view(layer * static_cast<std::size_t>(out_dim), out_dim), y);
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
  matmul(xb_.data(), n_, weights_->wq, l, c.dim, q);
  matmul(xb_.data(), n_, weights_->wk, l, c.kv_dim(), k);
  matmul(xb_.data(), n_, weights_->wv, l, c.kv_dim(), v);
  for (int t = 0; t < n_; ++t) {
    rope(q + t * dim, c.heads, pos_ + t);
    rope(k + t * kv_dim, c.kv_heads, pos_ + t);
  }
}

void LlamaModel::layer_output(int layer, const float* attn) {
  const LlamaConfig& c = weights_->config;
  const auto l = static_cast<std::size_t>(layer);
  const std::size_t dim = static_cast<std::size_t>(c.dim);
  matmul(attn, n_, weights_->wo, l, c.dim, xb2_.data());
  for (std::size_t i = 0; i < x_.size(); ++i) x_[i] += xb2_[i];
  for (int t = 0; t < n_; ++t) {
    rmsnorm(xb_.data() + t * dim, x_.data() + t * dim, weights_->rms_ffn.data() + l * dim, c.dim, c.norm_eps);
  }
  matmul(xb_.data(), n_, weights_->w1, l, c.hidden_dim, hb_.data());
  matmul(xb_.data(), n_, weights_->w3, l, c.hidden_dim, hb2_.data());
  for (std::size_t i = 0; i < hb_.size(); ++i) {
    const float gate = hb_[i];
    hb_[i] = gate / (1.0f + std::exp(-gate)) * hb2_[i];  // SwiGLU: silu(w1 x) * w3 x
  }
  matmul(hb_.data(), n_, weights_->w2, l, c.dim, xb2_.data());
  for (std::size_t i = 0; i < x_.size(); ++i) x_[i] += xb2_[i];
}

const std::vector<float>& LlamaModel::logits() {
  const LlamaConfig& c = weights_->config;
  const auto dim = static_cast<std::size_t>(c.dim);
  for (int t = 0; t < n_; ++t) {
    rmsnorm(xb_.data() + t * dim, x_.data() + t * dim, weights_->rms_final.data(), c.dim, c.norm_eps);
  }
  logits_.resize(static_cast<std::size_t>(n_) * c.vocab_size);
  matmul(xb_.data(), n_, weights_->wcls, 0, c.vocab_size, logits_.data());
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

namespace kv {

std::vector<float> reference_forward(const LlamaWeights& w, const std::vector<int>& tokens) {
  const LlamaConfig& c = w.config;
  const auto dim = static_cast<std::size_t>(c.dim), kv_dim = static_cast<std::size_t>(c.kv_dim());
  const auto hidden = static_cast<std::size_t>(c.hidden_dim), head = static_cast<std::size_t>(c.head_dim());
  const std::size_t n = tokens.size();
  auto matvec = [](const DenseMatrix& m, std::size_t layer, const float* x, std::size_t rows, float* y) {
    dense_ref(x, 1, m.view(layer * rows, static_cast<int>(rows)), y);
  };
  auto norm = [&](const float* x, const float* weight, float* out) {
    double ss = 0.0;
    for (std::size_t i = 0; i < dim; ++i) ss += static_cast<double>(x[i]) * x[i];
    const double scale = 1.0 / std::sqrt(ss / static_cast<double>(dim) + c.norm_eps);
    for (std::size_t i = 0; i < dim; ++i) out[i] = static_cast<float>(weight[i] * (scale * x[i]));
  };
  auto rotate = [&](float* v, std::size_t heads, std::size_t pos) {
    for (std::size_t h = 0; h < heads; ++h) {
      for (std::size_t i = 0; i < head / 2; ++i) {
        const double freq = std::pow(static_cast<double>(c.rope_theta), -2.0 * static_cast<double>(i) / static_cast<double>(head));
        const double angle = static_cast<double>(pos) * freq;
        float* p = v + h * head + 2 * i;
        const double a = p[0], b = p[1];
        p[0] = static_cast<float>(a * std::cos(angle) - b * std::sin(angle));
        p[1] = static_cast<float>(a * std::sin(angle) + b * std::cos(angle));
      }
    }
  };
  std::vector<float> x(n * dim), xb(dim), q(n * dim), attn(n * dim), h1(hidden), h3(hidden), tmp(dim);
  std::vector<float> k(n * kv_dim), v(n * kv_dim);
  for (std::size_t t = 0; t < n; ++t) {
    std::copy_n(w.token_embedding.data() + static_cast<std::size_t>(tokens[t]) * dim, dim, x.data() + t * dim);
  }
  const AttentionShape shape{c.heads, c.kv_heads, c.head_dim(), 1.0f / std::sqrt(static_cast<float>(c.head_dim()))};
  for (std::size_t l = 0; l < static_cast<std::size_t>(c.layers); ++l) {
    for (std::size_t t = 0; t < n; ++t) {
      norm(x.data() + t * dim, w.rms_att.data() + l * dim, xb.data());
      matvec(w.wq, l, xb.data(), dim, q.data() + t * dim);
      matvec(w.wk, l, xb.data(), kv_dim, k.data() + t * kv_dim);
      matvec(w.wv, l, xb.data(), kv_dim, v.data() + t * kv_dim);
      rotate(q.data() + t * dim, static_cast<std::size_t>(c.heads), t);
      rotate(k.data() + t * kv_dim, static_cast<std::size_t>(c.kv_heads), t);
    }
    attention_ref(shape, q.data(), static_cast<int>(n), k.data(), v.data(), static_cast<int>(n), attn.data());
    for (std::size_t t = 0; t < n; ++t) {
      matvec(w.wo, l, attn.data() + t * dim, dim, tmp.data());
      for (std::size_t i = 0; i < dim; ++i) x[t * dim + i] += tmp[i];
      norm(x.data() + t * dim, w.rms_ffn.data() + l * dim, xb.data());
      matvec(w.w1, l, xb.data(), hidden, h1.data());
      matvec(w.w3, l, xb.data(), hidden, h3.data());
      for (std::size_t i = 0; i < hidden; ++i) {
        const double gate = h1[i];
        h1[i] = static_cast<float>(gate / (1.0 + std::exp(-gate)) * h3[i]);
      }
      matvec(w.w2, l, h1.data(), dim, tmp.data());
      for (std::size_t i = 0; i < dim; ++i) x[t * dim + i] += tmp[i];
    }
  }
  const auto vocab = static_cast<std::size_t>(c.vocab_size);
  std::vector<float> logits(n * vocab);
  for (std::size_t t = 0; t < n; ++t) {
    norm(x.data() + t * dim, w.rms_final.data(), xb.data());
    matvec(w.wcls, 0, xb.data(), vocab, logits.data() + t * vocab);
  }
  return logits;
}

}  // namespace kv
