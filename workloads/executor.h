// The executor runs a workload script through a model backend, the KV cache and a sparse
// decoder, and times the engine's work (clock host).
//
// Synthetic backend: the generator stands in for the model, so its time is not counted; what
// is timed is the engine work of the sampled layers (append, selection, attention), scaled by
// layers / sampled layers and flagged extrapolated. The sparse decoder's quality checks run
// after each attention call, outside the timed region (PhaseTimes::quality_ms). A prompt (or
// turn) whose prefill ends at or before `full_prefill_positions` attends every query; past it,
// the prompt attends `probe_queries` queries at the end of up to `probe_chunks` of its chunks
// (every chunk still appends all its tokens), and the per-query attention time is fitted as
// a + b * position and summed over every query of the prompt - also extrapolated.
//
// Llama backend: every layer runs for real, the model's compute is timed (model_compute), and
// a reference model with an F32 cache and full attention runs in lockstep on the same tokens
// (LockstepScorer, not timed) so that every scored position adds to the accuracy report. Generating workloads
// are teacher-forced on the text: the "generated" tokens are the text's next tokens, so both
// models see the same stream.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>
#include <variant>
#include <vector>

#include "accuracy.h"
#include "attention/paged_attention.h"
#include "lockstep_scorer.h"
#include "kv_cache.h"
#include "model/backend.h"
#include "model/llama_model.h"
#include "selection_quality.h"
#include "sim_regions.h"
#include "sparse/sparse_decoder.h"
#include "speculation.h"
#include "workload.h"

namespace kvbench {

// One finished decode step or prefill chunk, for whoever collects per-step operation counts.
struct StepDone {
  kv::Phase phase = kv::Phase::Decode;
  int request = 0;
  int tokens = 1;    // tokens the step appended
  int attended = 1;  // queries it attended per layer (a probed synthetic chunk attends fewer)
  int context = 0;   // tokens in the cache after the step
  // Tokens the step added to the output: `tokens` (-1) for prompts and plain decode steps; a
  // speculative draft step adds none, a verify step its committed tokens.
  int produced = -1;
  // Share of a decode step's dense model work the step ran: a layers:N draft step runs N layers
  // and the output head (kv::layers_draft_dense_share); 1 otherwise.
  double model_share = 1.0;
};

struct ExecutionOptions {
  // Polled before every step; when it reads true the run stops with ExecutionStopped (an
  // interrupted repetition is dropped, never half stored).
  const std::atomic<bool>* stop = nullptr;
  // Exists only to test gates: every thread that works on an attention call does this share of
  // its own CPU time in the call again as busy work, inside the timed region (0: off), so the
  // slowdown shows in wall time and in CPU time alike. Nothing else may set it.
  double test_slowdown = 0.0;
  // Called after every decode step and prefill chunk, outside the timed regions.
  std::function<void(const StepDone&)> on_step;
  // Called before the operations of each request run (quality figures per request).
  std::function<void(int)> on_request;
  // Checks sampled decode steps against exact attention, outside the timed regions (span
  // quality); null: no checks.
  kvbench::QualityMonitor* quality = nullptr;
  int prefill_chunk = 512;  // tokens per prefill step
  // Synthetic: queries attended per probed chunk. One block of the prefill kernel: 16 or fewer
  // would time the multi-query decode (kv::kMaxVerifyQueries) instead of the prefill.
  int probe_queries = kv::kPrefillQueryBlock;
  int probe_chunks = 4;     // synthetic: probed chunks per request
  // Synthetic: a prompt (or turn) whose prefill ends at or before this position runs in full
  // (attention at most 2048^2 / 2 query-key pairs per layer: the sanitizer builds run the
  // built-in suites in their tests); past it, probe and fit.
  int full_prefill_positions = 2048;
  // Speculative decoding: decode ops run as rounds of draft proposals and one verify step;
  // `draft` is the draft's own KV cache for draft "kv" (the config's draft formats, the model's
  // geometry; null for "layers:N", whose draft writes the target's pages), `seed` draws the
  // synthetic backend's acceptances. On the llama backend decode runs free: each decode op
  // generates its tokens greedily (speculation's and plain decoding's agree but at near-ties),
  // and the lockstep reference follows those tokens without scoring them (the accuracy figures
  // cover the prompts' positions). Null: plain decoding.
  const SpeculativeConfig* speculative = nullptr;
  kv::KVCache* draft = nullptr;
  // A preset draft (synthetic): its own generator, whose geometry `draft` has. Prompts are
  // prefilled into its copy by it (append only, no attention: the generator's K/V need none),
  // in the same steps as the target's and timed with their appends. Null: the target's model.
  kv::ModelBackend* draft_model = nullptr;
  // The draft's times, counts and bytes times this ratio state them in the target's share of
  // executed layers (its own layers / executed layers over the target's); 1 when they match.
  double draft_layer_ratio = 1.0;
  // A preset draft's dense work per token over the target's (StepDone::model_share of its
  // steps; a prompt step runs both models).
  double draft_model_share = 1.0;
  std::uint64_t seed = 1;
};

struct ExecutionStopped : std::runtime_error {
  ExecutionStopped() : std::runtime_error("interrupted") {}
};

// What the engine's threads spent on a span (runtime/work_clock.h): CPU time and, where the
// machine counts them, user-space instructions; scaled and extrapolated like the wall times.
struct SpanWork {
  double cpu_ms = 0.0;
  double instructions = 0.0;
  SpanWork& operator+=(const SpanWork& o) {
    cpu_ms += o.cpu_ms;
    instructions += o.instructions;
    return *this;
  }
  SpanWork scaled(double f) const { return {cpu_ms * f, instructions * f}; }
};

struct PhaseTimes {
  double total_ms = 0.0;   // the phase's timed work (engine, plus model on the llama backend)
  double append_ms = 0.0;  // KVCache::append: quantization, page allocation, summaries
  double attend_ms = 0.0;  // attention calls: selection, waits for pages, kernels
  double model_ms = 0.0;   // llama: the transformer outside attention (0 on synthetic)
  double prefix_ms = 0.0;  // prefix cache: looking a prompt up, sharing its pages, caching the prompt's
  double dma_wait_ms = 0.0;
  // Not part of total_ms or of any latency: quality checks against exact attention and the
  // llama side's reference model, measured so their cost is visible (not scaled).
  double quality_ms = 0.0;
  // The engine threads' work in total_ms and in its parts.
  SpanWork total_work, append_work, attend_work, model_work;
};

// Speculative decoding's counts and times (ExecutionOptions::speculative).
struct SpeculationTotals {
  std::uint64_t verify_steps = 0;
  std::uint64_t proposed = 0;   // draft tokens proposed
  std::uint64_t accepted = 0;   // of them, accepted
  std::uint64_t committed = 0;  // tokens committed by verify steps (accepted + the target's own)
  // The draft's work (scaled like the decode times): synthetic, its appends and attention;
  // llama, its whole forward passes.
  double draft_ms = 0.0;
  double verify_ms = 0.0;       // verify steps and their commits (scaled)
  std::size_t draft_peak_bytes = 0;  // the draft cache's peak sealed bytes, executed layers
};

struct ExecutionResult {
  std::vector<double> ttft_ms;          // per request with a prompt
  std::vector<double> request_tpot_ms;  // per request with decode steps: its mean step time
  std::vector<int> request_of_ttft;     // the request each ttft belongs to
  std::vector<int> request_of_tpot;
  std::vector<double> tpot_ms;          // per decode step
  PhaseTimes prefill, decode;
  int prefill_tokens = 0;
  int decode_tokens = 0;
  // Prefix cache (CacheConfig::prefix_cache): per request with a prompt, in ttft order, the
  // prompt's tokens and how many of them came from the cache.
  std::vector<int> prompt_tokens;
  std::vector<int> prefix_hit_tokens;
  std::vector<int> repeat_requests;  // Script::repeat_requests
  bool sessions = false;             // Script::sessions
  double layer_scale = 1.0;    // model layers / executed layers
  bool extrapolated = false;   // host timings scaled from sampled layers or probed chunks
  bool prefill_probed = false; // some prefill attention was extrapolated from probes
  std::optional<AccuracyReport> accuracy;  // llama backend
  std::optional<SpeculationTotals> speculation;
  // Llama with speculative decoding (free-running decode): the tokens the decode ops fed, in order.
  std::vector<int> generated;
};

// The llama side: the tested model (for logits), the token stream and the lockstep reference.
struct LlamaRun {
  kv::LlamaModel* tested = nullptr;
  kv::LlamaModel* reference = nullptr;
  kv::KVCache* reference_cache = nullptr;
  const std::vector<int>* tokens = nullptr;
};

// The pages of the script's images that end at or before position `length`, for a cache of
// `page_tokens`-token pages: [begin / page, ceil(end / page)). An image's last page may be
// partial; the text after it then shares that page, and is selected with the image.
std::vector<kv::ImagePages> image_pages(const Script& script, int page_tokens, int length);

class Executor {
 public:
  // ask_needle: the synthetic backend's question switch (index, -1 = none); may be empty.
  Executor(kv::ModelBackend& model, kv::KVCache& cache, kv::SparseDecoder& decoder, double layer_scale,
           std::function<void(int)> ask_needle, std::optional<LlamaRun> llama, ExecutionOptions options = {});
  ExecutionResult run(const Script& script);

 private:
  struct LayerTimes {
    double append_ms = 0.0, attend_ms = 0.0, model_ms = 0.0;
    double quality_ms = 0.0;  // untimed work: the decoder's checks
    double predict_ms = 0.0;  // the end of a prefill: the first decode step's selection, planned for prefetch
    SpanWork append_work, attend_work, model_work;
  };
  // What run() gathers across a script's ops: per-request figures, and the prefix cache's skip.
  struct ScriptRun {
    std::map<int, double> ttft;                    // request -> prefill ms
    std::map<int, std::pair<double, int>> decode;  // request -> (ms, steps)
    std::map<int, std::pair<int, int>> prompts;    // request -> (prompt tokens, tokens from the prefix cache)
    int skip = 0;  // prompt tokens still to skip: they came from the prefix cache
  };
  // Where the op group from `first` ends: a prefill and those that join it (Op::joins_previous) run as one.
  static const Op* op_group_end(const Op* first, const Op* ops_end);
  // Ops [first, end) merged into one op made current: its request, its tokens into tokens_.
  Op enter_op(const Op* first, const Op* end);
  // A prefill group within its prompt: the prefix cache's share, images, needle question and ttft.
  void run_prompt(const Script& script, const Op& op, const Op* first, const Op* group_end, const Op* ops_end,
                  ExecutionResult& result, ScriptRun& state);
  // A decode op: plain steps, or speculative rounds while two tokens or more remain.
  void run_decode(const Op& op, ExecutionResult& result, ScriptRun& state);
  // After the script: the sequences released (the draft's peak read first), the reference's ended.
  void end_sequences(ExecutionResult& result);
  // The per-request figures, in request order.
  static void report_requests(const ScriptRun& state, ExecutionResult& result);
  void new_sequence(const Op& op);
  // The tokens of ops [first, end) on the synthetic backend (content ids and offsets).
  static void synthetic_tokens(const Op* first, const Op* end, std::vector<int>& out);
  // The first prompt of a sequence, ops [first, end): shares its longest cached prefix and
  // returns the tokens shared (0 without the cache). Its time goes to `prefix_ms`.
  int share_cached_prefix(const Op* first, const Op* end, double& prefix_ms);
  // After a sequence's first prompt: its whole pages join the cache.
  void cache_prompt(double& prefix_ms);
  // before_decode: a decode op follows, whose first step the prompt's last query predicts.
  void run_prefill(const Op& op, ExecutionResult& result, double& request_ttft, bool before_decode);
  double decode_step(ExecutionResult& result);
  // Speculative decoding: one round of draft proposals and a verify step that commits at most
  // `remaining` tokens; returns the tokens committed.
  int speculative_round(ExecutionResult& result, int remaining, double& ms);
  // The draft's sequence takes the committed tokens it lacks, one draft step each; returns ms.
  double draft_catch_up();
  // Tokens in the draft's copy of the context (every layer holds as many between steps).
  int draft_length() const;
  // One draft step: the token at the draft's end (kv: its own copy; layers:N: the target's
  // sequence, tentative), appended and attended in the draft's layers. Returns its ms; on the
  // llama backend `proposal` receives the draft's greedy next token.
  double draft_step(int token, int* proposal = nullptr);
  // Llama, free-running decode: the token the last step's logits choose (row `row`).
  int greedy_token(int row) const;
  // Llama, free-running decode: the token to feed next, chosen by the last prompt step when no
  // decode step has chosen one yet.
  int take_pending();
  // Accounts a decode step's (or round's) time for `tokens` tokens.
  void account_decode(ExecutionResult& result, const LayerTimes& t, double extra_ms, int tokens);
  // What one step runs, by mode. A prompt chunk: n tokens from the script or the text at pos_,
  // the last `attend` queries of each layer attended (n: all, 0: none); with `predict`, the last
  // token's query plans the next decode step (SparseDecoder::predict_next).
  struct PromptStep {
    int n = 0;
    int attend = 0;
    bool predict = false;
  };
  // One token at pos_ (a decode step).
  struct DecodeStep {};
  // Speculative decoding's verify step: the k + 1 tentative tokens (the pending token and the
  // draft's proposals) in one multi-query attention per layer. After a layers:N draft the
  // layers below shared_layers already hold the proposals' K/V: only the last token's is new.
  struct VerifyStep {
    const int* tokens = nullptr;
    int n = 0;
    int shared_layers = 0;
  };
  using StepMode = std::variant<PromptStep, DecodeStep, VerifyStep>;
  // Runs one step. With a draft (speculative decoding) the draft's cache takes the same K/V but
  // in a verify step: prompts and plain decode steps keep its copy of the context; that time is
  // the append's. A verify step ends a decode step like a single token's does.
  LayerTimes step(const StepMode& mode);
  // One part of a step's engine work: timed into `ms`, the engine's work in it added to `work`
  // (runtime/work_clock.h) and, but for the synthetic generator standing in for the model,
  // counted under the sim clock in the phase's region (sim_regions.h): the cpu and sim clocks
  // cover the same work. `after` runs inside the timed region, outside the counted one.
  template <class Fn, class After>
  void span_part(kv::sim::WorkPart part, double& ms, SpanWork& work, Fn&& fn, After&& after);
  template <class Fn>
  void span_part(kv::sim::WorkPart part, double& ms, SpanWork& work, Fn&& fn) {
    span_part(part, ms, work, std::forward<Fn>(fn), [] {});
  }
  // The llama side's reference model and scoring; returns its (untimed) milliseconds. With
  // `follow`, the reference runs on tokens_ at pos_ and nothing is scored (free-running decode).
  double score(int n, bool follow = false);
  double dma_wait_ms() const;

  kv::ModelBackend& model_;
  kv::KVCache& cache_;
  kv::SparseDecoder& decoder_;
  double scale_;
  std::function<void(int)> ask_needle_;
  std::optional<LlamaRun> llama_;
  ExecutionOptions options_;
  kv::StepBuffers buffers_;
  std::vector<float> probe_q_;
  std::vector<float> draft_q_, draft_k_, draft_v_;  // a preset draft's prompt K/V
  std::optional<kv::SeqId> seq_;
  std::vector<int> tokens_;  // synthetic: the sequence's token ids by position
  // Where decode tokens come from. Scripted: the script's tokens (synthetic), or the text the
  // reference follows (llama). FreeRunning: llama with speculative decoding, whose decode ops
  // generate their tokens (tokens_ holds the sequence, prompts from the text); pending_ is the
  // next token chosen and not yet fed.
  enum class TokenSource : std::uint8_t { Scripted, FreeRunning };
  TokenSource source_ = TokenSource::Scripted;
  bool free_running() const { return source_ == TokenSource::FreeRunning; }
  std::optional<int> pending_;
  double draft_share_ = 1.0;  // StepDone::model_share of a draft step
  double copy_share_ = 1.0;   // ... of a prompt or plain decode step (a preset draft runs in it too)
  std::optional<kv::SeqId> draft_seq_;
  std::mt19937_64 accept_rng_;
  int prompt_end_ = -1;      // the first prompt's length, once run; -1 before
  int pos_ = 0;
  // With a visual block: the script's next image. Images are prefilled in order, and a script's
  // images are positions of each sequence that holds them (as image_pages() takes them).
  std::size_t next_image_ = 0;
  int offset_ = 0;  // stream position of pos 0
  int request_ = 0; // the request of the op being run
  std::optional<LockstepScorer> lockstep_;  // the llama side
};

}  // namespace kvbench
