#include <catch2/catch.hpp>

#include <algorithm>

#include "runtime/error.h"
#include "workload.h"

using namespace kvbench;

namespace {

ScriptTarget synthetic(int max_positions = 1 << 17) {
  ScriptTarget t;
  t.synthetic = true;
  t.max_positions = max_positions;
  t.seed = 7;
  return t;
}

WorkloadConfig workload(const std::string& kind) {
  WorkloadConfig w;
  w.name = kind;
  w.kind = kind;
  return with_defaults(w, 512);
}

int tokens_of(const Script& s, OpKind kind) {
  int n = 0;
  for (const Op& op : s.ops) n += op.kind == kind ? op.tokens : 0;
  return n;
}

}  // namespace

TEST_CASE("Workload defaults fill what the kind uses", "[workloads]") {
  CHECK(workload("rag").context_tokens == 16384);
  CHECK(workload("rag").gen_tokens == 32);
  CHECK(workload("codebase").context_tokens == 65536);
  CHECK(workload("codebase").gen_tokens == 256);
  CHECK(workload("roleplay").turns == 20);
  CHECK(workload("multimodal").visual_tokens == 576);
  CHECK(workload("perplexity").context_tokens == 512);  // the model's context
  CHECK(workload("rag").text == kDefaultText);
  WorkloadConfig given;
  given.kind = "rag";
  given.context_tokens = 1000;
  CHECK(with_defaults(given, 512).context_tokens == 1000);
}

TEST_CASE("rag: one request, the needle inside the retrieved chunks, asked by the question and every decode step", "[workloads]") {
  const ScriptOrSkip built = build_script(workload("rag"), synthetic());
  REQUIRE(built.skipped.empty());
  const Script& s = built.script;
  CHECK(s.requests == 1);
  CHECK(s.positions == 16384 + 32);
  CHECK(tokens_of(s, OpKind::Prefill) == 16384);
  CHECK(tokens_of(s, OpKind::Decode) == 32);
  REQUIRE(s.needles.size() == 1);
  const int documents = 16384 - 32;
  CHECK(s.needles[0] >= documents / 10);
  CHECK(s.needles[0] < documents * 9 / 10);
  // The documents (asking nothing), the question, the answer.
  REQUIRE(s.ops.size() == 4);
  CHECK(s.ops[1].kind == OpKind::Prefill);
  CHECK(s.ops[1].tokens == documents);
  CHECK(s.ops[1].ask_needle == -1);
  CHECK(s.ops[2].kind == OpKind::Prefill);
  CHECK(s.ops[2].tokens == 32);
  CHECK(s.ops[2].ask_needle == 0);
  CHECK(s.ops[3].kind == OpKind::Decode);
  CHECK(s.ops[3].ask_needle == 0);
  // The same seed places the needle at the same position; another seed elsewhere.
  CHECK(build_script(workload("rag"), synthetic()).script.needles == s.needles);
  ScriptTarget other = synthetic();
  other.seed = 8;
  CHECK(build_script(workload("rag"), other).script.needles != s.needles);
}

TEST_CASE("codebase: four questions, each about a definition in its quarter of the code, and their answers", "[workloads]") {
  const Script s = build_script(workload("codebase"), synthetic()).script;
  const int code = 65536 - 4 * 32;
  REQUIRE(s.needles.size() == 4);
  for (int d = 0; d < 4; ++d) {
    CHECK(s.needles[static_cast<std::size_t>(d)] >= code * d / 4);
    CHECK(s.needles[static_cast<std::size_t>(d)] < code * (d + 1) / 4);
  }
  // The code, then per question its 32-token prompt and its answer, both asking its definition.
  std::vector<int> asked_by_prompt, asked_by_answer, requests;
  for (const Op& op : s.ops) {
    if (op.kind == OpKind::Prefill && op.tokens == 32) asked_by_prompt.push_back(op.ask_needle);
    if (op.kind == OpKind::Decode) {
      asked_by_answer.push_back(op.ask_needle);
      requests.push_back(op.request);
    }
  }
  CHECK(asked_by_prompt == std::vector<int>{0, 1, 2, 3});
  CHECK(asked_by_answer == std::vector<int>{0, 1, 2, 3});
  CHECK(requests == std::vector<int>{0, 1, 2, 3});
  CHECK(s.requests == 4);
  CHECK(tokens_of(s, OpKind::Prefill) == 65536);
  CHECK(tokens_of(s, OpKind::Decode) == 256);
}

TEST_CASE("roleplay: turns on one sequence, the persona fact asked in the last reply only", "[workloads]") {
  WorkloadConfig w = workload("roleplay");
  const Script s = build_script(w, synthetic()).script;
  CHECK(s.requests == 20);
  CHECK(std::count_if(s.ops.begin(), s.ops.end(), [](const Op& op) { return op.kind == OpKind::NewSequence; }) == 1);
  CHECK(s.positions >= 4096);
  CHECK(s.positions <= 8192);
  REQUIRE(s.needles.size() == 1);
  CHECK(s.needles[0] < w.context_tokens / 12);
  int asking = 0;
  for (const Op& op : s.ops) {
    if (op.kind == OpKind::Decode && op.ask_needle >= 0) {
      ++asking;
      CHECK(op.request == 19);
    }
  }
  CHECK(asking == 1);
  CHECK(w.system_prompt_tokens == 512);
  CHECK(w.user_tokens == 128);
  CHECK(w.gen_tokens == (6144 - 512) / 20 - 128);
  // A reply longer than the context is cut at context_tokens, and the turns after it dropped.
  w.gen_tokens = 10000;
  const Script capped = build_script(w, synthetic()).script;
  CHECK(capped.requests == 1);
  CHECK(capped.positions == w.context_tokens);
  CHECK(tokens_of(capped, OpKind::Decode) == 6144 - 512 - 128);
  w.system_prompt_tokens = 6100;
  CHECK_THROWS_WITH(build_script(w, synthetic()), Catch::Contains("context_tokens") && Catch::Contains("system prompt"));
}

TEST_CASE("rag requests: a sequence each over the same documents, each with its own question and needle", "[workloads][prefix]") {
  WorkloadConfig w = workload("rag");
  w.context_tokens = 8192;
  w.requests = 3;
  const Script s = build_script(w, synthetic()).script;
  CHECK(s.requests == 3);
  CHECK(s.repeat_requests == std::vector<int>{1, 2});
  CHECK(!s.sessions);
  REQUIRE(s.needles.size() == 3);
  std::vector<const Op*> documents, questions;
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    if (s.ops[i].kind != OpKind::NewSequence) continue;
    REQUIRE(i + 3 < s.ops.size());
    documents.push_back(&s.ops[i + 1]);
    questions.push_back(&s.ops[i + 2]);
    CHECK(s.ops[i + 3].kind == OpKind::Decode);
  }
  REQUIRE(documents.size() == 3);
  for (int r = 0; r < 3; ++r) {
    const Op& d = *documents[static_cast<std::size_t>(r)];
    const Op& q = *questions[static_cast<std::size_t>(r)];
    CHECK(d.tokens == 8192 - 32);
    CHECK(d.content == documents[0]->content);  // the same tokens
    CHECK(d.content_offset == 0);
    CHECK(q.content != documents[0]->content);
    CHECK(q.ask_needle == r);
    CHECK(q.request == r);
    for (int other = 0; other < r; ++other) CHECK(q.content != questions[static_cast<std::size_t>(other)]->content);
    CHECK(s.needles[static_cast<std::size_t>(r)] >= d.tokens / 10);
    CHECK(s.needles[static_cast<std::size_t>(r)] < d.tokens * 9 / 10);
  }
  // One request keeps the needle of the single-request script.
  w.requests = 1;
  CHECK(build_script(w, synthetic()).script.needles[0] == s.needles[0]);
  ScriptTarget llama = synthetic();
  llama.synthetic = false;
  llama.text_tokens = 1 << 20;
  w.requests = 2;
  CHECK_THAT(build_script(w, llama).skipped, Catch::Contains("synthetic backend"));
}

TEST_CASE("roleplay sessions: one system prompt for every session, then turns of user messages and replies", "[workloads][prefix]") {
  WorkloadConfig w = workload("roleplay");
  w.sessions = 5;
  w.turns = 4;
  w.system_prompt_tokens = 2048;
  w.user_tokens = 128;
  w.gen_tokens = 64;
  w = with_defaults(w, 512);
  const Script s = build_script(w, synthetic()).script;
  CHECK(s.sessions);
  CHECK(s.requests == 20);
  CHECK(s.positions == 2048 + 4 * (128 + 64));
  CHECK(s.repeat_requests == std::vector<int>{4, 8, 12, 16});
  int sequences = 0, system_content = -1, asked = 0;
  std::vector<int> user_contents;
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const Op& op = s.ops[i];
    if (op.kind == OpKind::NewSequence) {
      ++sequences;
      REQUIRE(i + 1 < s.ops.size());
      const Op& system = s.ops[i + 1];
      CHECK(system.tokens == 2048);
      if (system_content < 0) system_content = system.content;
      CHECK(system.content == system_content);
      CHECK(system.request == (sequences - 1) * 4);
    } else if (op.kind == OpKind::Prefill && op.tokens == 128) {
      CHECK(op.joins_previous == (user_contents.size() % 4 == 0));  // a session's first message joins its system prompt
      CHECK(std::find(user_contents.begin(), user_contents.end(), op.content) == user_contents.end());
      user_contents.push_back(op.content);
    } else if (op.kind == OpKind::Decode) {
      CHECK(op.tokens == 64);
      if (op.ask_needle == 0) {
        ++asked;
        CHECK(op.request % 4 == 3);  // each session's last reply
      }
    }
  }
  CHECK(sequences == 5);
  CHECK(user_contents.size() == 20);
  CHECK(asked == 5);
  REQUIRE(s.needles.size() == 1);
  CHECK(s.needles[0] < 2048);
  CHECK(s.turns == 4);
}

TEST_CASE("a prefix cache's warm-up script is each sequence's first prompt, in order", "[workloads][prefix]") {
  WorkloadConfig rp = workload("roleplay");
  rp.sessions = 3;
  rp.turns = 4;
  rp.system_prompt_tokens = 256;
  rp = with_defaults(rp, 512);
  const Script roleplay = build_script(rp, synthetic()).script;
  const Script warm = warm_script(roleplay);
  // Per session: a new sequence, its system prompt and the first user message that joins it.
  REQUIRE(warm.ops.size() == 9);
  for (int session = 0; session < 3; ++session) {
    const Op* ops = &warm.ops[static_cast<std::size_t>(session) * 3];
    CHECK(ops[0].kind == OpKind::NewSequence);
    CHECK(ops[1].kind == OpKind::Prefill);
    CHECK(ops[1].tokens == 256);
    CHECK(ops[2].kind == OpKind::Prefill);
    CHECK(ops[2].joins_previous);
    CHECK(ops[2].request == session * 4);
  }
  CHECK(tokens_of(warm, OpKind::Decode) == 0);
  CHECK(warm.turns == roleplay.turns);

  WorkloadConfig rag = workload("rag");
  rag.requests = 3;
  rag.context_tokens = 2048;
  rag = with_defaults(rag, 512);
  const Script requests = build_script(rag, synthetic()).script;
  const Script rag_warm = warm_script(requests);
  // Every request's whole prompt (documents and question), nothing it generates.
  int prompt_tokens = 0, sequences = 0;
  for (const Op& op : requests.ops) {
    if (op.kind == OpKind::NewSequence) ++sequences;
    if (op.kind == OpKind::Prefill) prompt_tokens += op.tokens;
  }
  CHECK(sequences == 3);
  CHECK(tokens_of(rag_warm, OpKind::Prefill) == prompt_tokens);
  CHECK(tokens_of(rag_warm, OpKind::Decode) == 0);
  CHECK(warm_script(rag_warm).ops.size() == rag_warm.ops.size());  // a warm-up of a warm-up is itself
}

TEST_CASE("synthetic token ids are a function of the content and the offset", "[workloads][prefix]") {
  CHECK(synthetic_token(3, 10) == synthetic_token(3, 10));
  CHECK(synthetic_token(3, 10) != synthetic_token(3, 11));
  CHECK(synthetic_token(3, 10) != synthetic_token(4, 10));
  for (int i = 0; i < 1000; ++i) CHECK(synthetic_token(i, i * 7) >= 0);
}

TEST_CASE("multimodal: needles inside the images, one question each, the llama backend skips it", "[workloads]") {
  const WorkloadConfig w = workload("multimodal");
  const Script s = build_script(w, synthetic()).script;
  REQUIRE(s.needles.size() == 2);
  int pos = 0, image = 0;
  for (const Op& op : s.ops) {
    if (op.kind != OpKind::Prefill) continue;
    if (op.visual) {
      CHECK(s.needles[static_cast<std::size_t>(image)] >= pos);
      CHECK(s.needles[static_cast<std::size_t>(image)] < pos + op.tokens);
      ++image;
    }
    pos += op.tokens;
  }
  CHECK(image == 2);
  CHECK(tokens_of(s, OpKind::Prefill) == 1024 + 2 * 576 + 2 * 32);
  ScriptTarget llama = synthetic(4096);
  llama.synthetic = false;
  llama.text_tokens = 100000;
  CHECK_THAT(build_script(w, llama).skipped, Catch::Contains("vision encoder"));
}

TEST_CASE("multimodal for a visual pool: every image starts on a fresh page, the text before it padded", "[workloads]") {
  WorkloadConfig w = workload("multimodal");
  w.visual_tokens = 100;  // not a whole number of pages: an image's last page is partial
  const Script plain = build_script(w, synthetic()).script;
  for (int page : {16, 64}) {
    ScriptTarget target = synthetic();
    target.image_page_tokens = page;
    const Script s = build_script(w, target).script;
    CAPTURE(page);
    REQUIRE(s.images.size() == 2);
    int padding = 0;
    for (std::size_t i = 0; i < s.images.size(); ++i) {
      CHECK(s.images[i].begin % page == 0);
      CHECK(s.images[i].end - s.images[i].begin == 100);
      padding = s.images[i].begin - plain.images[i].begin;
      CHECK(padding >= 0);
      CHECK(padding < page * static_cast<int>(i + 1));  // less than a page an image
      CHECK(s.needles[i] >= s.images[i].begin);
      CHECK(s.needles[i] < s.images[i].end);
    }
    CHECK(s.positions == plain.positions + padding);
    CHECK(s.ops.front().kind == OpKind::NewSequence);
    CHECK(s.ops.front().length == s.positions);
    CHECK(tokens_of(s, OpKind::Prefill) + tokens_of(s, OpKind::Decode) == s.positions);
  }
  // Without a page size, images fall where the text leaves them.
  CHECK(plain.images[0].begin == 1024 - 2 * (1024 / 3));
}

TEST_CASE("perplexity: windows of the text from an empty cache, synthetic and oversized cases are skipped", "[workloads]") {
  ScriptTarget llama;
  llama.synthetic = false;
  llama.max_positions = 512;
  llama.text_tokens = 1300;
  WorkloadConfig w = workload("perplexity");
  Script s = build_script(w, llama).script;
  CHECK(s.teacher_forced);
  CHECK(s.requests == 3);  // windows with a prediction: ceil((1300 - 1) / 512)
  std::vector<int> offsets, lengths;
  for (const Op& op : s.ops) {
    if (op.kind == OpKind::NewSequence) {
      offsets.push_back(op.stream_offset);
      lengths.push_back(op.length);
    }
  }
  CHECK(offsets == std::vector<int>{0, 512, 1024});
  CHECK(lengths == std::vector<int>{512, 512, 276});
  w.windows = 4;
  CHECK_THAT(build_script(w, llama).skipped, Catch::Contains("4 asked"));
  CHECK_THAT(build_script(workload("perplexity"), synthetic()).skipped, Catch::Contains("llama backend"));
  w.windows = 0;
  w.context_tokens = 1024;
  CHECK_THAT(build_script(w, llama).skipped, Catch::Contains("exceeds the model's 512 positions"));
}

TEST_CASE("A workload larger than the model is skipped with its reason, never shrunk", "[workloads]") {
  const ScriptOrSkip built = build_script(workload("rag"), synthetic(4096));
  CHECK(built.skipped == "rag needs 16416 positions; the model takes 4096");
  ScriptTarget llama = synthetic(1 << 20);
  llama.synthetic = false;
  llama.text_tokens = 1000;
  CHECK_THAT(build_script(workload("rag"), llama).skipped, Catch::Contains("the text has 1000 tokens"));
}

TEST_CASE("The largest decode context is the longest a decode step attends over", "[workloads]") {
  Script s;
  CHECK(largest_decode_context(s) == 0);
  s.ops = {{OpKind::NewSequence}, {OpKind::Prefill, 100}, {OpKind::Decode, 10}, {OpKind::Prefill, 50}, {OpKind::Decode, 5},
           {OpKind::NewSequence}, {OpKind::Prefill, 150}, {OpKind::Decode, 1}, {OpKind::Prefill, 900}};
  CHECK(largest_decode_context(s) == 165);  // the trailing prefill is never decoded over
  WorkloadConfig mm = workload("multimodal");
  mm.images = 2;
  mm.context_tokens = 1024;
  mm.gen_tokens = 32;
  const ScriptOrSkip built = build_script(with_defaults(mm, 4096), synthetic());
  REQUIRE(built.skipped.empty());
  CHECK(largest_decode_context(built.script) == built.script.positions);  // it ends with the last answer
}

TEST_CASE("speculative: a context, then one long generation, on either backend", "[workloads][speculative]") {
  const WorkloadConfig w = workload("speculative");
  CHECK(w.context_tokens == 4096);
  CHECK(w.gen_tokens == 256);
  const Script s = build_script(w, synthetic()).script;
  REQUIRE(s.ops.size() == 3);
  CHECK(s.ops[0].kind == OpKind::NewSequence);
  CHECK(tokens_of(s, OpKind::Prefill) == 4096);
  CHECK(tokens_of(s, OpKind::Decode) == 256);
  CHECK(s.positions == 4096 + 256);
  CHECK(s.requests == 1);
  WorkloadConfig one = w;
  one.gen_tokens = 1;
  CHECK_THROWS_AS(build_script(one, synthetic()), kv::InputError);
}
