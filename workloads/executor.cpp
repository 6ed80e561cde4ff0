#include "executor.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <stdexcept>

#include "runtime/error.h"
#include "runtime/work_clock.h"

namespace kvbench {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

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
}

double Executor::dma_wait_ms() const { return static_cast<double>(cache_.stats().memory.dma_wait_ns) * 1e-6; }

void Executor::new_sequence(const Op& op) {
  if (seq_) {
    cache_.release(*seq_);
    decoder_.forget(*seq_);
  }
  seq_ = cache_.create_sequence();
  if (lockstep_) lockstep_->begin_sequence(op.length);
  pos_ = 0;
  offset_ = op.stream_offset;
}

Executor::LayerTimes Executor::step(int n, int attend, bool predict) {
  if (options_.stop != nullptr && options_.stop->load(std::memory_order_relaxed)) throw ExecutionStopped();
  const kv::ModelGeometry& g = model_.geometry();
  const auto rows = static_cast<std::size_t>(n);
  const auto q_row = static_cast<std::size_t>(g.q_heads) * static_cast<std::size_t>(g.head_dim);
  const auto kv_row = static_cast<std::size_t>(g.kv_heads) * static_cast<std::size_t>(g.head_dim);
  buffers_.q.resize(rows * q_row);
  buffers_.k.resize(rows * kv_row);
  buffers_.v.resize(rows * kv_row);
  buffers_.attn.assign(rows * q_row, 0.0f);
  const int* tokens = llama_ ? llama_->tokens->data() + offset_ + pos_ : nullptr;
  LayerTimes t;
  auto start = Clock::now();
  kv::WorkStamp work = kv::engine_work();
  model_.begin_step(tokens, n, pos_);
  t.model_ms += ms_since(start);
  add_work_since(work, t.model_work);
  const std::size_t tail = rows - static_cast<std::size_t>(attend);
  // The generator computes only the queries used: the attended ones, and the last for a prediction.
  if (!llama_) model_.skip_query_rows(static_cast<int>(predict ? std::min(tail, rows - 1) : tail));
  for (int layer = 0; layer < g.layers; ++layer) {
    start = Clock::now();
    work = kv::engine_work();
    model_.layer_qkv(layer, buffers_.q.data(), buffers_.k.data(), buffers_.v.data());
    t.model_ms += ms_since(start);
    add_work_since(work, t.model_work);
    start = Clock::now();
    work = kv::engine_work();
    cache_.append(*seq_, layer, buffers_.k.data(), buffers_.v.data(), n);
    t.append_ms += ms_since(start);
    add_work_since(work, t.append_work);
    // Before the layer's prompt attention: the prompt's last query scores the pages for the
    // first decode step from their key bounds alone, so the pages it predicts, which the
    // attention streams through L1 anyway, stay there.
    if (predict) {
      start = Clock::now();
      decoder_.predict_next(*seq_, layer, buffers_.q.data() + (rows - 1) * q_row);
      t.predict_ms += ms_since(start);
    }
    if (attend == 0) continue;
    start = Clock::now();
    work = kv::engine_work();
    const std::uint64_t serial_start = kv::serial_cpu_ns();
    if (options_.test_slowdown > 0.0) cache_.pool().set_work_inflation(options_.test_slowdown);
    if (n == 1) {
      decoder_.attend(*seq_, layer, buffers_.q.data(), buffers_.attn.data());
    } else if (decoder_.policy().sparse_prefill) {
      decoder_.prefill(*seq_, layer, buffers_.q.data() + tail * q_row, attend, buffers_.attn.data() + tail * q_row);
    } else {
      cache_.attend(*seq_, layer, buffers_.q.data() + tail * q_row, attend, buffers_.attn.data() + tail * q_row);
    }
    if (options_.test_slowdown > 0.0) {
      // The pool inflated its items; the calling thread's own part is inflated here.
      cache_.pool().set_work_inflation(0.0);
      kv::burn_cpu_ns(static_cast<std::uint64_t>(static_cast<double>(kv::serial_cpu_ns() - serial_start) * options_.test_slowdown));
    }
    t.attend_ms += ms_since(start);
    add_work_since(work, t.attend_work);
    if (n == 1 && options_.quality != nullptr) {  // outside the timed region: the check costs far more than the step
      start = Clock::now();
      if (options_.quality->check(cache_, decoder_, buffers_.q.data(), buffers_.attn.data())) t.quality_ms += ms_since(start);
    }
    start = Clock::now();
    work = kv::engine_work();
    model_.layer_output(layer, buffers_.attn.data());
    t.model_ms += ms_since(start);
    add_work_since(work, t.model_work);
  }
  if (!llama_) model_.skip_query_rows(0);
  if (n == 1) decoder_.end_step();
  if (llama_) {
    start = Clock::now();
    work = kv::engine_work();
    llama_->tested->logits();
    t.model_ms += ms_since(start);
    add_work_since(work, t.model_work);
  } else {
    t.model_ms = 0.0;  // the generator stands in for the model: not counted
    t.model_work = {};
  }
  return t;
}

// The lockstep reference on the same tokens, and its scoring. Not timed.
double Executor::score(int n) {
  if (!lockstep_) return 0.0;
  const auto start = Clock::now();
  lockstep_->score(llama_->tokens->data() + offset_ + pos_, n, pos_, llama_->tested->last_logits());
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
    const LayerTimes t = step(n, attend, before_decode && c == chunks - 1);
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
    if (options_.on_step) options_.on_step({kv::Phase::Prefill, request_, n, attend, pos_});
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

double Executor::decode_step(ExecutionResult& result) {
  const LayerTimes t = step(1, 1);
  const double ms = (t.append_ms + t.attend_ms + t.model_ms) * scale_;
  result.tpot_ms.push_back(ms);
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
  ++result.decode_tokens;
  result.decode.quality_ms += t.quality_ms + score(1);
  ++pos_;
  if (options_.on_step) options_.on_step({kv::Phase::Decode, request_, 1, 1, pos_});
  return ms;
}

ExecutionResult Executor::run(const Script& script) {
  ExecutionResult result;
  result.layer_scale = scale_;
  std::map<int, double> ttft;                     // request -> prefill ms
  std::map<int, std::pair<double, int>> decode;   // request -> (ms, steps)
  for (const Op& op : script.ops) {
    request_ = op.request;
    switch (op.kind) {
      case OpKind::NewSequence:
        new_sequence(op);
        break;
      case OpKind::Prefill: {
        if (!seq_) throw std::invalid_argument("script: a prefill before any sequence");
        const bool before_decode = &op != &script.ops.back() && (&op + 1)->kind == OpKind::Decode;
        if (ask_needle_ && op.ask_needle >= 0) ask_needle_(op.ask_needle);  // a question's prompt asks it
        run_prefill(op, result, ttft[op.request], before_decode);
        if (ask_needle_ && op.ask_needle >= 0) ask_needle_(-1);
        break;
      }
      case OpKind::Decode: {
        if (!seq_) throw std::invalid_argument("script: a decode before any sequence");
        cache_.set_phase(kv::Phase::Decode);
        if (ask_needle_) ask_needle_(op.ask_needle);
        const double dma_before = dma_wait_ms();
        auto& [ms, steps] = decode[op.request];
        for (int i = 0; i < op.tokens; ++i) {
          ms += decode_step(result);
          ++steps;
        }
        result.decode.dma_wait_ms += (dma_wait_ms() - dma_before) * scale_;
        if (ask_needle_) ask_needle_(-1);
        break;
      }
    }
  }
  if (seq_) {
    cache_.release(*seq_);
    decoder_.forget(*seq_);
    seq_.reset();
  }
  if (lockstep_) lockstep_->end_sequence();
  for (const auto& [request, ms] : ttft) {
    result.ttft_ms.push_back(ms);
    result.request_of_ttft.push_back(request);
  }
  for (const auto& [request, entry] : decode) {
    result.request_tpot_ms.push_back(entry.second > 0 ? entry.first / entry.second : 0.0);
    result.request_of_tpot.push_back(request);
  }
  result.extrapolated = scale_ != 1.0 || result.prefill_probed;
  if (lockstep_) result.accuracy = lockstep_->report();
  return result;
}

}  // namespace kvbench
