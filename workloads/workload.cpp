#include "workload.h"

#include <algorithm>
#include <string>

#include "runtime/error.h"

namespace kvbench {

namespace {

// splitmix64: needle placement from the suite's seed, the same on every machine.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A position in [lo, hi), drawn from (seed, salt).
int place(std::uint64_t seed, std::uint64_t salt, int lo, int hi) {
  return lo + static_cast<int>(mix(seed * 0x100000001B3ull + salt) % static_cast<std::uint64_t>(std::max(1, hi - lo)));
}

Op new_sequence(int length, int offset = 0) {
  Op op;
  op.kind = OpKind::NewSequence;
  op.length = length;
  op.stream_offset = offset;
  return op;
}

// Where the tokens of an op come from: a content and the offset in it.
struct Source {
  int content = 0;
  int offset = 0;
};

Op prefill(int tokens, int request, Source from, bool visual = false, int ask_needle = -1) {
  Op op;
  op.kind = OpKind::Prefill;
  op.tokens = tokens;
  op.request = request;
  op.visual = visual;
  op.ask_needle = ask_needle;
  op.content = from.content;
  op.content_offset = from.offset;
  return op;
}

Op decode(int tokens, int request, Source from, int ask_needle = -1) {
  Op op;
  op.kind = OpKind::Decode;
  op.tokens = tokens;
  op.request = request;
  op.ask_needle = ask_needle;
  op.content = from.content;
  op.content_offset = from.offset;
  return op;
}

// Contents are numbered in the order a script first reads them.
class Contents {
 public:
  Source fresh() { return {next_++, 0}; }

 private:
  int next_ = 0;
};

constexpr int kRoleplayPersonaShare = 12;  // the system prompt is 1/12 of the conversation
constexpr int kRoleplayUserTokens = 128;
constexpr int kQuestionTokens = 32;        // a question's prompt (rag, codebase, multimodal)

// The kinds' scripts. Each writes its operations, needles and sizes into `s`, or returns why
// the target cannot run it (empty: it can); `where` names the workload in input errors.

// Perplexity: consecutive windows of the text, each scored from an empty cache.
std::string perplexity_script(const WorkloadConfig& c, const ScriptTarget& target, const std::string& where, Script& s) {
  if (target.synthetic) return "perplexity scores a real model's predictions: it needs the llama backend";
  const int window = c.context_tokens;
  if (window < 2) throw kv::InputError(where, "context_tokens", "a perplexity window needs at least 2 tokens");
  if (window > target.max_positions) {
    return "window of " + std::to_string(window) + " tokens exceeds the model's " + std::to_string(target.max_positions) +
           " positions";
  }
  const int available = (target.text_tokens - 1 + window - 1) / window;  // windows with a prediction
  const int windows = c.windows > 0 ? c.windows : available;
  if (windows > available || windows == 0) {
    return "the text has " + std::to_string(target.text_tokens) + " tokens: " + std::to_string(available) +
           " windows of " + std::to_string(window) + ", " + std::to_string(windows) + " asked";
  }
  s.teacher_forced = true;
  for (int w = 0; w < windows; ++w) {
    const int start = w * window;
    const int length = std::min(window, target.text_tokens - start);
    s.ops.push_back(new_sequence(length, start));
    s.ops.push_back(decode(length, w, {}));
    s.positions = std::max(s.positions, length);
    s.stream_tokens = start + length;
  }
  s.requests = windows;
  return {};
}

// Rag: where each request's needle sits in the shared documents, and whether requests repeat.
std::string rag_script(const WorkloadConfig& c, const ScriptTarget& target, const std::string& where, Script& s) {
  // The retrieved documents, then the user's question (it asks for the needle), the answer.
  // Every request starts a new sequence from the same documents with its own question.
  if (c.context_tokens <= kQuestionTokens) {
    throw kv::InputError(where, "context_tokens", "must exceed the question's " + std::to_string(kQuestionTokens) + " tokens");
  }
  if (c.requests > 1 && !target.synthetic) {
    return "rag requests need the synthetic backend: the llama side teacher-forces one text, so its requests would repeat one another";
  }
  Contents contents;
  const int total = c.context_tokens + c.gen_tokens;
  const int documents = c.context_tokens - kQuestionTokens;
  const Source docs = contents.fresh();
  for (int r = 0; r < c.requests; ++r) {
    s.ops.push_back(new_sequence(total));
    if (r > 0) s.repeat_requests.push_back(r);
    s.ops.push_back(prefill(documents, r, docs));
    if (target.synthetic) {
      s.needles.push_back(place(target.seed, r == 0 ? 1 : 40 + static_cast<std::uint64_t>(r), documents / 10, documents * 9 / 10));
    }
    const int ask = target.synthetic ? r : -1;
    s.ops.push_back(prefill(kQuestionTokens, r, contents.fresh(), false, ask));
    s.ops.push_back(decode(c.gen_tokens, r, contents.fresh(), ask));
  }
  s.requests = c.requests;
  s.positions = total;
  return {};
}

// Speculative: one context and one generation long enough for a verify step to commit.
std::string speculative_script(const WorkloadConfig& c, const std::string& where, Script& s) {
  // A context, then one long generation: what a policy's speculative loop runs through, set
  // against the same case without it.
  if (c.gen_tokens < 2) throw kv::InputError(where, "gen_tokens", "must be >= 2: a verify step commits at least one token after the first");
  Contents contents;
  const int total = c.context_tokens + c.gen_tokens;
  s.ops.push_back(new_sequence(total));
  s.ops.push_back(prefill(c.context_tokens, 0, contents.fresh()));
  s.ops.push_back(decode(c.gen_tokens, 0, contents.fresh()));
  s.requests = 1;
  s.positions = total;
  return {};
}

// Codebase: where each definition's needle sits in the code, and how the answers share gen_tokens.
std::string codebase_script(const WorkloadConfig& c, const ScriptTarget& target, const std::string& where, Script& s) {
  // The code, then four questions in turn, each about one definition: a user's message
  // (it asks for the definition) and the answer. context_tokens counts the questions.
  constexpr int kDefinitions = 4;
  const int code = c.context_tokens - kDefinitions * kQuestionTokens;
  if (code < kDefinitions) {
    throw kv::InputError(where, "context_tokens",
                         "must exceed the " + std::to_string(kDefinitions) + " questions' " +
                             std::to_string(kDefinitions * kQuestionTokens) + " tokens");
  }
  Contents contents;
  const int total = c.context_tokens + c.gen_tokens;
  s.ops.push_back(new_sequence(total));
  s.ops.push_back(prefill(code, 0, contents.fresh()));
  for (int d = 0; d < kDefinitions; ++d) {
    const int lo = code * d / kDefinitions, hi = code * (d + 1) / kDefinitions;
    if (target.synthetic) s.needles.push_back(place(target.seed, 10 + static_cast<std::uint64_t>(d), lo, hi));
    const int ask = target.synthetic ? d : -1;
    s.ops.push_back(prefill(kQuestionTokens, d, contents.fresh(), false, ask));
    const int steps = c.gen_tokens * (d + 1) / kDefinitions - c.gen_tokens * d / kDefinitions;
    if (steps > 0) s.ops.push_back(decode(steps, d, contents.fresh(), ask));
  }
  s.requests = kDefinitions;
  s.positions = total;
  return {};
}

// Roleplay: how many turns fit in context_tokens, and the last turn's reply cut to fit.
std::string roleplay_script(const WorkloadConfig& c, const ScriptTarget& target, const std::string& where, Script& s) {
  // Sessions over one system prompt: each its system prompt, then turns of a user message and
  // a reply, capped at context_tokens (the last turns cut short or dropped).
  const int system = c.system_prompt_tokens;
  if (system < 1) throw kv::InputError(where, "system_prompt_tokens", "must be >= 1 (the persona lives there)");
  if (c.user_tokens < 1) throw kv::InputError(where, "user_tokens", "must be >= 1");
  if (system + c.user_tokens > c.context_tokens) {
    throw kv::InputError(where, "context_tokens",
                         std::to_string(c.context_tokens) + " tokens leave no room for the first turn after a " +
                             std::to_string(system) + "-token system prompt and a " + std::to_string(c.user_tokens) +
                             "-token user message");
  }
  if (c.sessions > 1 && !target.synthetic) {
    return "roleplay sessions need the synthetic backend: the llama side teacher-forces one text, so its sessions would repeat one another";
  }
  int total = system;
  int turns = 0;  // turns that fit
  for (int t = 0; t < c.turns && total + c.user_tokens <= c.context_tokens; ++t) {
    total += c.user_tokens + std::min(c.gen_tokens, c.context_tokens - total - c.user_tokens);
    ++turns;
  }
  Contents contents;
  const Source prompt = contents.fresh();
  if (target.synthetic) s.needles.push_back(place(target.seed, 20, 1, std::max(2, system)));
  for (int session = 0; session < c.sessions; ++session) {
    s.ops.push_back(new_sequence(total));
    const int first = session * turns;
    if (session > 0) s.repeat_requests.push_back(first);
    int pos = 0;
    for (int t = 0; t < turns; ++t) {
      if (t == 0) {
        s.ops.push_back(prefill(system, first, prompt));
        pos += system;
      }
      s.ops.push_back(prefill(c.user_tokens, first + t, contents.fresh()));
      s.ops.back().joins_previous = t == 0;
      pos += c.user_tokens;
      const int reply = std::min(c.gen_tokens, total - pos);
      if (reply > 0) s.ops.push_back(decode(reply, first + t, contents.fresh(), target.synthetic && t == turns - 1 ? 0 : -1));
      pos += reply;
    }
  }
  s.requests = c.sessions * turns;
  s.positions = total;
  s.sessions = true;
  s.turns = turns;
  return {};
}

// Multimodal: where the images fall among the text (page-aligned when asked) and each image's needle.
std::string multimodal_script(const WorkloadConfig& c, const ScriptTarget& target, Script& s) {
  if (!target.synthetic) return "the llama backend has no vision encoder: visual tokens need the synthetic backend";
  Contents contents;
  const int segments = c.images + 1;
  const int text = c.context_tokens / segments;
  const std::size_t sequence_op = s.ops.size();
  s.ops.push_back(new_sequence(0));  // its length once the text's padding is known
  int pos = 0;
  std::vector<int> image_start;
  // Text segments around the images: one before each image and one after the last.
  for (int i = 0; i < c.images; ++i) {
    int lead = i == 0 ? c.context_tokens - text * c.images : text;
    if (target.image_page_tokens > 0) {
      const int page = target.image_page_tokens;
      lead += (page - (pos + lead) % page) % page;
    }
    s.ops.push_back(prefill(lead, 0, contents.fresh()));
    pos += lead;
    image_start.push_back(pos);
    s.images.push_back({pos, pos + c.visual_tokens});
    s.ops.push_back(prefill(c.visual_tokens, 0, contents.fresh(), true));
    pos += c.visual_tokens;
  }
  s.ops.push_back(prefill(text, 0, contents.fresh()));
  pos += text;
  const int total = pos + c.images * (kQuestionTokens + c.gen_tokens);
  s.ops[sequence_op].length = total;
  // A small region of each image: the needle a question asks about.
  for (int i = 0; i < c.images; ++i) {
    s.needles.push_back(place(target.seed, 30 + static_cast<std::uint64_t>(i), image_start[static_cast<std::size_t>(i)],
                              image_start[static_cast<std::size_t>(i)] + c.visual_tokens));
  }
  for (int i = 0; i < c.images; ++i) {
    s.ops.push_back(prefill(kQuestionTokens, i, contents.fresh(), false, i));
    s.ops.push_back(decode(c.gen_tokens, i, contents.fresh(), i));
  }
  s.requests = c.images;
  s.positions = total;
  return {};
}

}  // namespace

int synthetic_token(int content, int offset) {
  return static_cast<int>(mix((static_cast<std::uint64_t>(static_cast<std::uint32_t>(content)) << 32) ^
                              static_cast<std::uint32_t>(offset)) >>
                          33);
}

WorkloadConfig with_defaults(WorkloadConfig c, int model_context) {
  const auto fill = [](int& field, int value) {
    if (field == 0) field = value;
  };
  if (c.kind == "rag") {
    fill(c.context_tokens, 16384);
    fill(c.gen_tokens, 32);
    fill(c.requests, 1);
  } else if (c.kind == "codebase") {
    fill(c.context_tokens, 65536);
    fill(c.gen_tokens, 256);
  } else if (c.kind == "roleplay") {
    fill(c.turns, 20);
    fill(c.sessions, 1);
    fill(c.context_tokens, 6144);
    fill(c.system_prompt_tokens, c.context_tokens / kRoleplayPersonaShare);
    fill(c.user_tokens, kRoleplayUserTokens);
    // The reply takes the rest of a turn's share of the context.
    fill(c.gen_tokens, std::max(1, (c.context_tokens - c.system_prompt_tokens) / c.turns - c.user_tokens));
  } else if (c.kind == "multimodal") {
    fill(c.images, 2);
    fill(c.visual_tokens, 576);
    fill(c.context_tokens, 1024);
    fill(c.gen_tokens, 32);
  } else if (c.kind == "perplexity") {
    fill(c.context_tokens, model_context);
  } else if (c.kind == "speculative") {
    fill(c.context_tokens, 4096);
    fill(c.gen_tokens, 256);
  }
  if (c.text.empty()) c.text = kDefaultText;
  return c;
}

ScriptOrSkip build_script(const WorkloadConfig& c, const ScriptTarget& target) {
  ScriptOrSkip out;
  Script& s = out.script;
  const std::string where = "workload '" + c.name + "'";
  if (c.kind == "perplexity") {  // windows of the text itself: no positions or stream checks below
    out.skipped = perplexity_script(c, target, where, s);
    return out;
  }
  if (c.kind == "rag") {
    out.skipped = rag_script(c, target, where, s);
  } else if (c.kind == "speculative") {
    out.skipped = speculative_script(c, where, s);
  } else if (c.kind == "codebase") {
    out.skipped = codebase_script(c, target, where, s);
  } else if (c.kind == "roleplay") {
    out.skipped = roleplay_script(c, target, where, s);
  } else if (c.kind == "multimodal") {
    out.skipped = multimodal_script(c, target, s);
  } else {
    throw kv::InputError(where, "kind", "'" + c.kind + "' is not a workload kind");
  }
  if (!out.skipped.empty()) return out;
  if (s.positions > target.max_positions) {
    out.skipped = c.kind + " needs " + std::to_string(s.positions) + " positions; the model takes " +
                  std::to_string(target.max_positions);
    return out;
  }
  s.stream_tokens = s.positions;
  if (!target.synthetic && s.stream_tokens + 1 > target.text_tokens) {
    out.skipped = "the text has " + std::to_string(target.text_tokens) + " tokens; " + c.kind + " reads " +
                  std::to_string(s.stream_tokens + 1);
  }
  return out;
}

Script warm_script(const Script& script) {
  Script warm = script;  // its sizes, needles and images; its ops rebuilt
  warm.ops.clear();
  // A sequence's first prompt: the prefills right after it starts (the executor runs them as
  // one prompt and caches it).
  bool in_first_prompt = false;
  for (const Op& op : script.ops) {
    if (op.kind == OpKind::NewSequence) {
      warm.ops.push_back(op);
      in_first_prompt = true;
    } else if (op.kind == OpKind::Prefill && in_first_prompt) {
      warm.ops.push_back(op);
    } else {
      in_first_prompt = false;
    }
  }
  return warm;
}

int largest_decode_context(const Script& script) {
  int position = 0, largest = 0;
  for (const Op& op : script.ops) {
    if (op.kind == OpKind::NewSequence) position = 0;
    if (op.kind == OpKind::Prefill) position += op.tokens;
    if (op.kind == OpKind::Decode) {
      position += op.tokens;
      if (op.tokens > 0) largest = std::max(largest, position);
    }
  }
  return largest;
}

}  // namespace kvbench
