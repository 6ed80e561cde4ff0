// Workloads: what a case asks of the engine, as a script of operations over one model.
// A script is a value (built from the suite's sizes before anything runs), so it can be tested
// and compared without tensors; the executor (executor.h) runs it.
//
//   rag         retrieved document chunks, then a question whose answer sits in one chunk
//               (a planted needle the generated tokens ask for); with `requests` > 1, each
//               request is a new sequence over the same documents with a question (and a needle)
//               of its own: the multi-request mode of shared-context benchmarks
//   codebase    a long repository context, then structured output that refers back to a few
//               definitions (needles) in turn
//   roleplay    sessions of a system prompt (shared by every session, persona included), then
//               turns of user message + reply; a persona fact planted in the system prompt is
//               asked for in each session's last reply
//   multimodal  text interleaved with images (visual tokens, static after prefill), then one
//               question per image about a small region of it (a needle inside the image)
//   perplexity  teacher-forced scoring of a text in consecutive windows, each from an empty
//               cache, one token per step (test vector 4 of models/README.md)
//   speculative a context, then one long generation: what a policy's speculative decoding
//               (speculation.h) runs through, beside the same case decoding plainly
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvbench {

struct WorkloadConfig {
  std::string name;
  std::string kind;           // rag | codebase | roleplay | multimodal | perplexity | speculative
  int context_tokens = 0;     // 0: the kind's default (rag 16384, codebase 65536, roleplay 6144 in
                              // total, multimodal 1024 text tokens, perplexity the model's context,
                              // speculative 4096)
  int gen_tokens = 0;         // 0: rag 32, codebase 256, roleplay 60% of a turn, multimodal 32,
                              // speculative 256
  int turns = 0;              // roleplay: 0 = 20
  int requests = 0;           // rag: questions over the same documents, a sequence each; 0 = 1
  int sessions = 0;           // roleplay: sessions over the same system prompt; 0 = 1
  int system_prompt_tokens = 0;  // roleplay: 0 = context_tokens / 12
  int user_tokens = 0;        // roleplay: each turn's user message; 0 = 128
  int images = 0;             // multimodal: 0 = 2
  int visual_tokens = 0;      // multimodal: per image, 0 = 576
  int windows = 0;            // perplexity: 0 = every window of the text
  bool full_prefill = false;  // synthetic: every prompt attends every query (no probes fitted)
  std::string text;           // llama backend: the text (default tinystories-sample.txt)
  std::vector<std::string> models;  // names of the suite's models it runs on; empty: every model
  double ttft_target_ms = 0.0;  // 0: no target
  double tpot_target_ms = 0.0;
};

inline const char* const kWorkloadKinds[] = {"rag", "codebase", "roleplay", "multimodal", "perplexity", "speculative"};
inline constexpr const char* kDefaultText = "tinystories-sample.txt";

// The config with every size the kind uses filled in (model_context: the model's positions,
// for perplexity's default window).
WorkloadConfig with_defaults(WorkloadConfig config, int model_context);

enum class OpKind : std::uint8_t {
  NewSequence,  // release the current sequence (if any) and start an empty one
  Prefill,      // append `tokens` prompt tokens (text or visual) and attend them
  Decode,       // `tokens` decode steps, one token each
};

struct Op {
  OpKind kind = OpKind::Prefill;
  int tokens = 0;
  int request = 0;         // the request (turn, question) the op belongs to
  bool visual = false;     // Prefill of image tokens
  int ask_needle = -1;     // Prefill (a question) and Decode: index into Script::needles the queries ask for, -1 none
  int stream_offset = 0;   // NewSequence: where position 0 sits in the token stream (llama text)
  int length = 0;          // NewSequence: the tokens this sequence will hold
  // Prefill and Decode: what the tokens are (synthetic backend): a content (a document, a system
  // prompt, a user message, a reply) and where in it they start. Two sequences whose tokens come
  // from the same contents at the same offsets hold the same tokens.
  int content = 0;
  int content_offset = 0;
  // Prefill: the rest of the previous prefill's prompt (another content: a session's first user
  // message after its system prompt), prefilled with it as one chunked prefill.
  bool joins_previous = false;
};

// The synthetic backend's token id of offset `offset` in content `content`: a pure function,
// the same on every machine, in [0, 2^31).
int synthetic_token(int content, int offset);

struct Script {
  std::vector<Op> ops;
  int requests = 0;
  int positions = 0;         // the longest sequence
  int stream_tokens = 0;     // tokens of the text stream the script reads (llama backend)
  std::vector<int> needles;  // planted positions (synthetic backend)
  struct TokenRange {
    int begin = 0, end = 0;
  };
  std::vector<TokenRange> images;  // visual tokens' positions [begin, end)
  bool teacher_forced = false;  // perplexity: no prompt, no generation; every step is scored
  // The first request of each sequence after the first (rag requests, roleplay sessions): the
  // requests whose prompt may find an earlier one's prefix cached.
  std::vector<int> repeat_requests;
  bool sessions = false;  // roleplay: a sequence is a session of turns (else one request each)
  int turns = 0;          // roleplay: turns per session; turn t of session s is request s * turns + t
};

// What the model can do, for deciding whether a case can run.
struct ScriptTarget {
  bool synthetic = true;     // needles can be planted and visual tokens generated
  int max_positions = 0;     // the longest sequence the model takes
  int text_tokens = 0;       // llama: tokens in the text
  std::uint64_t seed = 1;    // needle placement
  // > 0: every image starts on a fresh page of this many tokens (a policy with a visual block
  // selects an image's pages apart from the text's): the text before an image fills out its
  // last page, so the sequence grows by less than a page an image. 0: images where they fall.
  int image_page_tokens = 0;
};

struct ScriptOrSkip {
  Script script;
  std::string skipped;  // non-empty: the case cannot run on this model, and why
};

// The most tokens any decode step of the script attends over (each step appends its token
// first); 0 when the script decodes nothing.
int largest_decode_context(const Script& script);

// A prefix cache's warm-up: every sequence of the script with its first prompt alone (no
// replies, no later turns), in order.
Script warm_script(const Script& script);

// Builds the script of a workload (with_defaults applied) for a model. Never shrinks a size to
// fit: a combination that cannot run comes back skipped with its reason.
ScriptOrSkip build_script(const WorkloadConfig& config, const ScriptTarget& target);

}  // namespace kvbench
