// stories15M (head_dim 48, the Llama-2 tokenizer): the model and tokenizer as fetched, the greedy
// test vector, perplexity against an independent computation, every KV format's accuracy, and
// how the model attends.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

#include "accuracy.h"
#include "attention_stats.h"
#include "e2e/e2e_support.h"
#include "fetched/stories15m.h"
#include "model/byte_reader.h"
#include "model/llama_model.h"
#include "test_support.h"

using namespace kv;

namespace {

std::string sample_text() { return kvtest::read_file(kvtest::model_file("tinystories-sample.txt")); }

CacheConfig cache(Format k, Format v, int window, int v_group = 16) {
  CacheConfig c;
  c.geometry = {6, 6, 6, 48, window};
  c.k_format = k;
  c.v_format = v;
  c.page_tokens = 16;
  c.v_group = v_group;
  c.threads = 2;
  return c;
}

// The tokenizer file as llama2.c's later exports write it: the same pieces and scores, with the
// 256 byte pieces at ids 3..258 stored as "<0xNN>" instead of the raw bytes.
std::vector<std::byte> with_hex_byte_pieces(const std::vector<std::byte>& raw) {
  std::vector<std::byte> out(raw.begin(), raw.begin() + 4);
  std::size_t at = 4;
  for (int id = 0; id < 32000; ++id) {
    float score;
    std::int32_t length;
    std::memcpy(&score, raw.data() + at, 4);
    std::memcpy(&length, raw.data() + at + 4, 4);
    std::string piece(reinterpret_cast<const char*>(raw.data() + at + 8), static_cast<std::size_t>(length));
    at += 8 + static_cast<std::size_t>(length);
    if (id >= 3 && id < 3 + 256) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", id - 3);
      piece = name;
    }
    const auto n = static_cast<std::int32_t>(piece.size());
    const auto* s = reinterpret_cast<const std::byte*>(&score);
    const auto* l = reinterpret_cast<const std::byte*>(&n);
    out.insert(out.end(), s, s + 4);
    out.insert(out.end(), l, l + 4);
    const auto* p = reinterpret_cast<const std::byte*>(piece.data());
    out.insert(out.end(), p, p + piece.size());
  }
  REQUIRE(at == raw.size());
  return out;
}

// An independent forward pass, written for this test from llama2.c's checkpoint format (version
// 0: seven int32 - dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size (negative: a separate
// classifier), seq_len - then fp32 arrays: embedding, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2,
// w3, rms_final, the RoPE tables, [classifier]) and run.c's arithmetic, in double, reading the
// file itself. Returns -log p(token[i+1]) for i = 0 .. n-2.
std::vector<double> independent_nll(const std::string& path, const std::vector<int>& tokens) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::int32_t h[7];
  std::memcpy(h, bytes.data(), sizeof(h));
  const int dim = h[0], hidden = h[1], layers = h[2], heads = h[3], kv_heads = h[4], vocab = std::abs(h[5]), seq = h[6];
  const int hs = dim / heads, kv_dim = hs * kv_heads;
  std::size_t at = sizeof(h);
  auto take = [&](std::size_t count) {
    std::vector<double> out(count);
    for (std::size_t i = 0; i < count; ++i) {
      float f;
      std::memcpy(&f, bytes.data() + at + 4 * i, 4);
      out[i] = f;
    }
    at += 4 * count;
    return out;
  };
  const auto L = static_cast<std::size_t>(layers), D = static_cast<std::size_t>(dim), H = static_cast<std::size_t>(hidden);
  const auto KV = static_cast<std::size_t>(kv_dim);
  const auto emb = take(static_cast<std::size_t>(vocab) * D);
  const auto rms_att = take(L * D), wq = take(L * D * D), wk = take(L * KV * D), wv = take(L * KV * D), wo = take(L * D * D);
  const auto rms_ffn = take(L * D), w1 = take(L * H * D), w2 = take(L * D * H), w3 = take(L * H * D), rms_final = take(D);
  at += 2 * static_cast<std::size_t>(seq) * static_cast<std::size_t>(hs / 2) * 4;  // the RoPE tables
  const std::vector<double> cls = h[5] < 0 ? take(static_cast<std::size_t>(vocab) * D) : emb;
  REQUIRE(at == bytes.size());

  auto rmsnorm = [&](const std::vector<double>& x, const double* w) {
    double ss = 0.0;
    for (double v : x) ss += v * v;
    const double s = 1.0 / std::sqrt(ss / dim + 1e-5);
    std::vector<double> out(D);
    for (std::size_t i = 0; i < D; ++i) out[i] = w[i] * s * x[i];
    return out;
  };
  auto matvec = [](const double* w, const std::vector<double>& x, std::size_t rows) {
    std::vector<double> out(rows);
    for (std::size_t r = 0; r < rows; ++r) {
      double acc = 0.0;
      for (std::size_t c = 0; c < x.size(); ++c) acc += w[r * x.size() + c] * x[c];
      out[r] = acc;
    }
    return out;
  };
  const std::size_t n = tokens.size();
  std::vector<std::vector<double>> kc(L * n), vc(L * n);
  std::vector<double> nll;
  for (std::size_t pos = 0; pos < n; ++pos) {
    std::vector<double> x(emb.begin() + static_cast<std::ptrdiff_t>(tokens[pos] * D),
                          emb.begin() + static_cast<std::ptrdiff_t>((tokens[pos] + 1) * D));
    for (std::size_t l = 0; l < L; ++l) {
      const auto xb = rmsnorm(x, rms_att.data() + l * D);
      auto q = matvec(wq.data() + l * D * D, xb, D);
      auto k = matvec(wk.data() + l * KV * D, xb, KV);
      const auto v = matvec(wv.data() + l * KV * D, xb, KV);
      for (std::size_t i = 0; i < D; i += 2) {  // run.c: pairs (i, i+1), frequency by the index inside the head
        const double freq = 1.0 / std::pow(10000.0, static_cast<double>(i % hs) / hs);
        const double c = std::cos(pos * freq), s = std::sin(pos * freq);
        for (auto* vec : {&q, &k}) {
          if (i >= vec->size()) continue;
          const double a = (*vec)[i], b = (*vec)[i + 1];
          (*vec)[i] = a * c - b * s;
          (*vec)[i + 1] = a * s + b * c;
        }
      }
      kc[l * n + pos] = k;
      vc[l * n + pos] = v;
      std::vector<double> att(D, 0.0);
      for (int hd = 0; hd < heads; ++hd) {
        const std::size_t kh = static_cast<std::size_t>(hd / (heads / kv_heads)) * hs;
        std::vector<double> score(pos + 1);
        double top = -INFINITY;
        for (std::size_t t = 0; t <= pos; ++t) {
          double dot = 0.0;
          for (int c = 0; c < hs; ++c) dot += q[hd * hs + c] * kc[l * n + t][kh + c];
          score[t] = dot / std::sqrt(static_cast<double>(hs));
          top = std::max(top, score[t]);
        }
        double sum = 0.0;
        for (double& s : score) sum += (s = std::exp(s - top));
        for (std::size_t t = 0; t <= pos; ++t) {
          for (int c = 0; c < hs; ++c) att[hd * hs + c] += score[t] / sum * vc[l * n + t][kh + c];
        }
      }
      const auto o = matvec(wo.data() + l * D * D, att, D);
      for (std::size_t i = 0; i < D; ++i) x[i] += o[i];
      const auto xf = rmsnorm(x, rms_ffn.data() + l * D);
      auto a = matvec(w1.data() + l * H * D, xf, H);
      const auto b = matvec(w3.data() + l * H * D, xf, H);
      for (std::size_t i = 0; i < H; ++i) a[i] = a[i] / (1.0 + std::exp(-a[i])) * b[i];
      const auto down = matvec(w2.data() + l * D * H, a, D);
      for (std::size_t i = 0; i < D; ++i) x[i] += down[i];
    }
    if (pos + 1 == n) break;
    const auto logits = matvec(cls.data(), rmsnorm(x, rms_final.data()), static_cast<std::size_t>(vocab));
    double top = -INFINITY;
    for (double v : logits) top = std::max(top, v);
    double sum = 0.0;
    for (double v : logits) sum += std::exp(v - top);
    nll.push_back(top + std::log(sum) - logits[static_cast<std::size_t>(tokens[pos + 1])]);
  }
  return nll;
}

}  // namespace

TEST_CASE("stories15M loads as fetched: its header, a shared classifier, the 32,000-piece tokenizer", "[stories15m]") {
  const kvtest::Stories15M& s = kvtest::stories15m();
  const LlamaConfig& c = s.weights->config;
  CHECK(c.dim == 288);
  CHECK(c.hidden_dim == 768);
  CHECK(c.layers == 6);
  CHECK(c.heads == 6);
  CHECK(c.kv_heads == 6);
  CHECK(c.head_dim() == 48);
  CHECK(c.vocab_size == 32000);
  CHECK(c.seq_len == 256);
  CHECK(s.weights->wcls.to_f32() == s.weights->token_embedding);
  CHECK(s.tokenizer.vocab_size() == 32000);
}

TEST_CASE("stories15M: the greedy test vector, 64 steps from \"Once upon a time\"", "[stories15m]") {
  const kvtest::Stories15M& s = kvtest::stories15m();
  ThreadPool pool(2);
  LlamaModel model(s.weights, 256, pool);
  for (Format f : {Format::F32, Format::F16}) {  // f16 KV: the same text at this length
    CAPTURE(format_name(f));
    KVCache kv(cache(f, f, 256));
    const std::vector<int> prompt = s.tokenizer.encode("Once upon a time", true, false);
    const std::vector<int> ids = generate_greedy(model, kv, prompt, 64);
    CHECK(ids.size() == 64);
    CHECK(s.tokenizer.decode_all(1, ids) ==
          "Once upon a time, there was a little girl named Lily. She loved to play outside in the sunshine. One day, she saw a "
          "big, red ball in the sky. It was the sun! She thought it was so pretty.\nLily wanted to play with the ball, but it "
          "was");
  }
}

TEST_CASE("The Llama-2 tokenizer round-trips the sample, and both of its file variants encode it alike", "[stories15m]") {
  const kvtest::Stories15M& s = kvtest::stories15m();
  const std::string text = sample_text();
  const std::vector<int> ids = s.tokenizer.encode(text, true, false);
  CHECK(ids.size() > 4 * 256);
  CHECK(s.tokenizer.decode_all(1, std::vector<int>(ids.begin() + 1, ids.end())) == text);

  // The raw-byte file and the <0xNN> one: "," is a byte piece (id 47) and a word piece (29892).
  const std::vector<std::byte> raw = read_file(kvtest::stories15m_file("tok32000.bin"));
  const Tokenizer hex = parse_llama2c_tokenizer(with_hex_byte_pieces(raw), "hex-bytes.bin", 32000);
  CHECK(s.tokenizer.piece(47) == ",");
  CHECK(s.tokenizer.piece(29892) == ",");
  CHECK(hex.piece(47) == "<0x2C>");
  CHECK(hex.encode(text, true, false) == ids);
  for (const std::string& line : {std::string("Spot, Tom and Sue."), std::string("\"Wow,\" said Kitty;"), std::string("a,b,c")}) {
    CAPTURE(line);
    CHECK(hex.encode(line, true, false) == s.tokenizer.encode(line, true, false));
  }
  // The ASCII sample needs no byte fallback but for the newline, which has no piece of its own.
  CHECK(std::all_of(ids.begin(), ids.end(), [](int id) { return id < 3 || id >= 3 + 256 || id == 3 + '\n'; }));
  CHECK(std::count(ids.begin(), ids.end(), 29892) > 100);  // "," as the word piece
  // Byte fallback: characters outside the vocabulary become their UTF-8 bytes, ids 3 + byte,
  // in both files, and decode back.
  const std::string rare = "Tom saw \xF0\x9F\xA6\x84 and \xE2\x98\x83.";
  const std::vector<int> rare_ids = s.tokenizer.encode(rare, true, false);
  CHECK(hex.encode(rare, true, false) == rare_ids);
  CHECK(std::count(rare_ids.begin(), rare_ids.end(), 3 + 0xF0) == 1);
  CHECK(s.tokenizer.decode_all(1, std::vector<int>(rare_ids.begin() + 1, rare_ids.end())) == rare);
  CHECK(hex.decode_all(1, std::vector<int>(rare_ids.begin() + 1, rare_ids.end())) == rare);
}

TEST_CASE("stories15M: F32-KV perplexity of the first window equals an independent computation", "[stories15m]") {
  const kvtest::Stories15M& s = kvtest::stories15m();
  std::vector<int> tokens = s.tokenizer.encode(sample_text(), true, false);
  tokens.resize(256);
  const std::vector<double> nll = independent_nll(kvtest::stories15m_file("stories15M.bin"), tokens);
  double sum = 0.0;
  for (double x : nll) sum += x;
  const double expected = std::exp(sum / static_cast<double>(nll.size()));
  ThreadPool pool(2);
  const CacheConfig f32 = cache(Format::F32, Format::F32, 256);
  const kvbench::AccuracyReport r = kvbench::score_tokens(s.weights, f32, f32, tokens, {256, 1, 1, {}}, pool);
  CHECK(r.predictions == 255);
  CHECK(r.reference_ppl == Approx(expected).epsilon(1e-4));
  CHECK(r.ppl == r.reference_ppl);
}

TEST_CASE("stories15M: every KV format's accuracy on four 256-token windows stays within its bound", "[stories15m]") {
  const kvtest::Stories15M& s = kvtest::stories15m();
  const std::vector<int> tokens = s.tokenizer.encode(sample_text(), true, false);
  ThreadPool pool(2);
  struct Bound {
    Format format;
    int residual;
    double ppl_delta_pct, kl_mean, top1_agree;
  };
  // Pages of 16, V groups of 16. q8 within 0.1% of the f32 perplexity and q4 within 2% (the
  // issue's targets); the KL and top-1 bounds are about twice the error measured (docs/engine.md).
  for (const Bound& b : std::vector<Bound>{
           {Format::F16, 0, 0.01, 1e-5, 0.995},
           {Format::FP8, 0, 1.0, 0.0025, 0.97},
           {Format::Q8, 0, 0.1, 2e-5, 0.995},
           {Format::Q4, 0, 2.0, 0.005, 0.96},
           {Format::Q4, 32, 2.0, 0.0015, 0.98},
           {Format::Q2, 0, 20.0, 0.2, 0.85},
       }) {
    CacheConfig tested = cache(b.format, b.format, 256);
    tested.residual_tokens = b.residual;
    const kvbench::AccuracyReport r =
        kvbench::score_tokens(s.weights, cache(Format::F32, Format::F32, 256), tested, tokens, {256, 1, 4, {}}, pool);
    CAPTURE(format_name(b.format), b.residual, r.ppl, r.reference_ppl, r.ppl_delta_pct, r.kl_mean, r.top1_agree);
    CHECK(r.predictions == 4 * 255);
    CHECK(std::abs(r.ppl_delta_pct) <= b.ppl_delta_pct);
    CHECK(r.kl_mean <= b.kl_mean);
    CHECK(r.top1_agree >= b.top1_agree);
  }
}

TEST_CASE("stories15M: a truncated or altered checkpoint is refused with the offset named", "[stories15m]") {
  const std::vector<std::byte> bytes = read_file(kvtest::stories15m_file("stories15M.bin"));
  const kvtest::TempDir dir("stories15m-damaged");
  const std::string path = dir.path + "/stories15M.bin";
  auto write = [&](const std::vector<std::byte>& b, std::size_t size) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(size));
  };
  write(bytes, bytes.size() - 4096);
  CHECK_THROWS_WITH(load_llama2c(path), Catch::Contains(path) && Catch::Contains("ends at offset 60811932, inside freq_cis tables"));
  write(bytes, 1000000);
  CHECK_THROWS_WITH(load_llama2c(path), Catch::Contains("ends at offset 1000000, inside token_embedding, offsets 28..36864028"));
  write(bytes, 20);
  CHECK_THROWS_WITH(load_llama2c(path), Catch::Contains(path) && Catch::Contains("offset 20"));
  std::vector<std::byte> altered = bytes;
  const std::int32_t heads = 5;  // 288 channels do not split into 5 heads
  std::memcpy(altered.data() + 12, &heads, 4);
  write(altered, altered.size());
  CHECK_THROWS_WITH(load_llama2c(path), Catch::Contains(path) && Catch::Contains("n_kv_heads: 6 is outside 1..5"));
  // A tokenizer cut short inside a piece names its offset too.
  const std::vector<std::byte> tok = read_file(kvtest::stories15m_file("tok32000.bin"));
  CHECK_THROWS_WITH(parse_llama2c_tokenizer(std::vector<std::byte>(tok.begin(), tok.begin() + 1000), "tok.bin", 32000),
                    Catch::Contains("tok.bin") && Catch::Contains("offset"));
}

TEST_CASE("stories15M: how it attends, measured over the sample", "[stories15m]") {
  const kvtest::Stories15M& s = kvtest::stories15m();
  const std::vector<int> tokens = s.tokenizer.encode(sample_text(), true, false);
  ThreadPool pool(2);
  kvbench::AttentionStatsOptions options;
  options.max_windows = 2;
  const kvbench::AttentionStats stats = kvbench::measure_attention(s.weights, tokens, options, pool);
  REQUIRE(stats.heads.size() == 36);
  CHECK(stats.windows == 2);
  CHECK(stats.first_query == 128);
  for (const kvbench::HeadAttention& a : stats.heads) {
    CAPTURE(a.layer, a.head, a.sink_mass, a.recent_mass, a.top_mass, a.next_layer_overlap);
    CHECK(a.sink_mass >= 0.0);
    CHECK(a.sink_mass <= 1.0 + 1e-9);
    CHECK(a.recent_mass <= 1.0 + 1e-9);
    // The heaviest tenth of the keys hold at least a tenth of the mass, and sinks or recent
    // tokens cannot hold more than all of it.
    CHECK(a.top_mass >= 0.1 - 1e-9);
    CHECK(a.top_mass <= 1.0 + 1e-9);
    CHECK(a.next_layer_overlap >= 0.0);
    CHECK(a.next_layer_overlap <= 1.0);
  }
  // A trained model is not uniform: its heaviest tenth of keys holds far more than a tenth.
  CHECK(stats.mean.top_mass > 0.3);
}

TEST_CASE("kvbench runs the accuracy suite's stories15M cases and attn-stats on the fetched files", "[stories15m][e2e]") {
  const kvtest::TempDir dir("stories15m-e2e");
  const kvtest::Output run = kvtest::run_kvbench("run --suite accuracy --filter 'stories15m/perplexity-256/(f16|q4)/' --db " +
                                                 dir.path + "/r.sqlite --heartbeat 0");
  INFO(run.text);
  REQUIRE(run.status == 0);
  CHECK(kvtest::sql_value(dir.path + "/r.sqlite", "SELECT count(DISTINCT case_name) FROM metric_values WHERE name = 'ppl'") == "2");
  const kvtest::Output stats = kvtest::run_kvbench("attn-stats --model " + kvtest::stories15m_file("stories15M.bin") +
                                                   " --tokenizer " + kvtest::stories15m_file("tok32000.bin") + " --text " +
                                                   kvtest::model_file("tinystories-sample.txt") + " --max-windows 1");
  INFO(stats.text);
  CHECK(stats.status == 0);
  CHECK(stats.text.find("6 layers x 6 q heads (head_dim 48), 1 window of 256 tokens") != std::string::npos);
}
