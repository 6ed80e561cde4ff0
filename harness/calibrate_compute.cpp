// Compute quantities of the host profile: exponentials, attention per KV format (decode and
// prefill fits), page sealing, selection, the decode bookkeeping the rates leave unexplained,
// and dense layers per weight format through the backend's own BLAS calls.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "bench_common.h"
#include "calibration_fits.h"
#include "calibration_steps.h"
#include "kernel_benchmarks.h"
#include "soc/cost_model.h"
#include "sparse/sparse_decoder.h"

namespace kvbench::calibration {

namespace {

using kv::soc::Quantity;

std::string contexts_text(const std::vector<int>& contexts) {
  std::string text = "contexts";
  for (std::size_t i = 0; i < contexts.size(); ++i) text += fmt::format("{}{}", i == 0 ? " " : i + 1 == contexts.size() ? " and " : ", ", contexts[i]);
  return text;
}

}  // namespace

void exponentials(Calibration& c, kv::soc::EngineProfile& cpu) {
  c.session.add("exp", micro::exp_benchmark);
  const micro::BenchmarkFigures f = c.session.run().at("exp");
  const double rate = f.counter("exp_per_second") * 1e-9 * c.threads;
  cpu.exp_g_per_s = measured(rate, "Gexp/s", fmt::format("{} over 64K softmax arguments on one core, times {} threads", f.label, c.threads));
  c.say(fmt::format("exponentials: {:.2f} G/s", rate));
}

void attention_rates(Calibration& c, kv::soc::EngineProfile& cpu) {
  // Per format: calls at three contexts fitted as a fixed cost per call plus a cost per
  // multiply-add, the exponentials taken out at the measured rate.
  const cases::LayerShape& s = cases::kLayer;
  const double exp_seconds = 1.0 / (cpu.exp_g_per_s.value * 1e9);
  const std::string contexts = contexts_text(cases::calibration_contexts(c.options.quick)) + " (two copies taking turns)";
  std::vector<double> call_us;
  for (kv::Format f : kv::kAllFormats) {
    std::vector<cases::AttentionCase> decode, prefill;
    for (const cases::AttentionCase& a : cases::calibration_attention_cases(c.options.quick)) {
      if (a.format != f) continue;
      (a.kind == cases::AttentionKind::Decode ? decode : prefill).push_back(a);
      c.session.add(a.name(), micro::attention_benchmark, a);
    }
    const auto r = c.session.run();
    const auto fit = [&](const std::vector<cases::AttentionCase>& calls) {
      std::vector<double> macs, seconds, exps;
      for (const cases::AttentionCase& a : calls) {
        macs.push_back(attention_macs(a.queries, a.ctx, s.q_heads, s.head_dim));
        seconds.push_back(r.at(a.name()).seconds_per_iteration);
        exps.push_back(attention_exps(a.queries, a.ctx, s.q_heads) * exp_seconds);
      }
      return fit_attention(macs, seconds, exps);
    };
    const auto less = [](const AttentionFit& fit) {
      return fit.exps_taken_out ? std::string("less exponentials")
                                : std::string("with the exponentials left in (their measured rate left the calls no time)");
    };
    const std::string name(kv::format_name(f));
    const AttentionFit decode_fit = fit(decode), prefill_fit = fit(prefill);
    const double decode_rate = decode_fit.rate, prefill_rate = prefill_fit.rate;
    const LineFit& decode_line = decode_fit.line;
    call_us.push_back(decode_line.intercept * 1e6);
    cpu.decode_gmac_per_s[static_cast<int>(f)] = measured(
        decode_rate, "GMAC/s",
        fmt::format("KVCache::attend, one query, {} K/V, {} q / {} kv heads x {}, {}, least-squares slope of time per multiply-add {}",
                    name, s.q_heads, s.kv_heads, s.head_dim, contexts, less(decode_fit)));
    cpu.prefill_gmac_per_s[static_cast<int>(f)] = measured(
        prefill_rate, "GMAC/s",
        fmt::format("KVCache::attend, {} queries, {} K/V, {}, least-squares slope {}", prefill.front().queries, name, contexts,
                    less(prefill_fit)));
    c.say(fmt::format("attention {}: decode {:.2f} GMAC/s, {:.1f} us per call; prefill {:.2f} GMAC/s", name, decode_rate, decode_line.intercept * 1e6,
                      prefill_rate));
  }
  std::sort(call_us.begin(), call_us.end());
  cpu.attention_call_us = measured(call_us[call_us.size() / 2], "us", "intercept of the decode fits, median over formats");
}

void page_sealing(Calibration& c, kv::soc::EngineProfile& cpu) {
  const auto seal_cases = cases::calibration_seal_cases(c.options.quick);
  for (const cases::SealCase& s : seal_cases) c.session.add(s.name(), micro::seal_benchmark, s);
  const auto r = c.session.run();
  for (const cases::SealCase& s : seal_cases) {
    const double rate = r.at(s.name()).counter("bytes_per_second") / sizeof(float) * 1e-9;  // K and V values
    const std::string name(kv::format_name(s.format));
    cpu.quantize_gvalue_per_s[static_cast<int>(s.format)] =
        measured(rate, "Gvalue/s", fmt::format("KVCache::append of {} tokens into {} pages (K and V values per second)", s.tokens, name));
    c.say(fmt::format("page sealing {}: {:.2f} Gvalue/s", name, rate));
  }
}

void selection(Calibration& c, kv::soc::EngineProfile& cpu) {
  // Quest bounds and the plan at two contexts: a fixed cost per selection plus a cost per bound product.
  const std::vector<int> contexts = cases::selection_contexts(c.options.quick);
  for (int ctx : contexts) c.session.add(fmt::format("selection/{}", ctx), micro::selection_benchmark, ctx);
  const auto r = c.session.run();
  std::vector<double> products, seconds;
  for (int ctx : contexts) {
    const micro::BenchmarkFigures& f = r.at(fmt::format("selection/{}", ctx));
    products.push_back(f.counter("bound_products"));
    seconds.push_back(f.seconds_per_iteration);
  }
  const LineFit line = least_squares(products, seconds);
  const double rate = line.rate(products.back(), seconds.back());
  cpu.quest_bounds_gproduct_per_s =
      measured(rate, "Gproduct/s", "quest_bounds and plan_selection (hybrid, 10%) over q4 " + contexts_text(contexts) + ", slope per bound product");
  cpu.select_call_us = measured(line.intercept * 1e6, "us", "intercept of the same fit: the fixed cost of one selection");
  c.say(fmt::format("selection: {:.2f} Gproduct/s, {:.1f} us per selection", rate, line.intercept * 1e6));
}

void decode_bookkeeping(Calibration& c, kv::soc::SocProfile& p) {
  // Sparse decode through the decoder on a pool without and with an L1 cap: what the kernel,
  // call and selection rates do not explain is charged per context page (selection history,
  // page views) and per page the capped pool manages (importance, prediction).
  const std::vector<int> contexts = cases::selection_contexts(c.options.quick);
  const std::string l2 = c.options.l2_dir + fmt::format("/kvbench-calibrate-pool-{}", ::getpid());
  std::filesystem::create_directories(l2);
  double residual[2][2] = {}, context_pages[2][2] = {}, managed_pages[2][2] = {};  // [capped][context]
  for (int capped = 0; capped < 2; ++capped) {
    std::vector<DecodeOps> sinks(contexts.size());
    for (std::size_t i = 0; i < contexts.size(); ++i) {
      micro::SparseDecodeCase d;
      d.policy.selector = kv::Selector::Hybrid;
      d.policy.budget = 0.10f;
      d.policy.sample_every = 1 << 30;
      d.ctx = contexts[i];
      if (capped != 0) {
        d.memory.l1_bytes = 8ull << 30;  // a cap nothing reaches: the bookkeeping without demotion
        d.memory.l2.dir = l2;
      }
      d.telemetry = &sinks[i];
      c.session.add(fmt::format("sparse-decode/{}/{}", capped, contexts[i]), micro::sparse_decode_benchmark, d);
    }
    const auto r = c.session.run();
    for (std::size_t i = 0; i < contexts.size(); ++i) {
      const DecodeOps& sink = sinks[i];
      kv::soc::StepOps step;
      step.phase = kv::Phase::Decode;
      step.attention = sink.ops;
      context_pages[capped][i] = static_cast<double>(sink.ops.context_pages) / sink.calls();
      managed_pages[capped][i] = static_cast<double>(sink.ops.managed_pages) / sink.calls();
      double prefetch = 0.0;
      const double predicted_ms = kv::soc::price_step(step, {}, p, 0.0, prefetch).ms / sink.calls();
      residual[capped][i] = r.at(fmt::format("sparse-decode/{}/{}", capped, contexts[i])).seconds_per_iteration * 1e3 - predicted_ms;
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(l2, ec);
  auto& cpu = p.engines[static_cast<int>(kv::soc::EngineKind::Cpu)];
  const double per_context = residual_per_unit(context_pages[0][0], residual[0][0], context_pages[0][1], residual[0][1]);
  cpu.context_page_ns = measured(per_context * 1e6, "ns",
                                 "SparseDecoder::attend (hybrid 10%, q4, no L1 cap) at " + contexts_text(contexts) +
                                     ": the time the kernel, call and selection rates leave unexplained, per context page");
  const double per_managed = residual_per_unit(managed_pages[1][0], residual[1][0] - residual[0][0], managed_pages[1][1], residual[1][1] - residual[0][1]);
  cpu.managed_page_ns = measured(per_managed * 1e6, "ns", "the same with an L1 cap and an L2 directory: the extra time per page the capped pool manages");
  c.say(fmt::format("decode bookkeeping: {:.0f} ns per context page, {:.0f} ns more per managed page", per_context * 1e6, per_managed * 1e6));
}

void dense_layers(Calibration& c, kv::soc::EngineProfile& cpu) {
  // The calls the llama backend makes (kv::dense): one decode token and a 16-token chunk per
  // weight format; f16 and q8 weights dequantized to f32 panels before each BLAS call.
  const auto dense_cases = cases::calibration_dense_cases(c.options.quick);
  for (const cases::DenseCase& d : dense_cases) c.session.add(d.name(), micro::dense_benchmark, d);
  const auto r = c.session.run();
  for (const cases::DenseCase& d : dense_cases) {
    const double rate = r.at(d.name()).counter("flops_per_second") / 2.0 * 1e-9;
    const int slot = static_cast<int>(d.format);  // f32, f16, q8: the profile's first three weight formats
    const std::string how =
        fmt::format("kv::dense {} {}x{} weight times {} ({}, OpenBLAS {} kernels) on the pool{}{}", kv::dense_format_name(d.format), d.out_dim,
                    d.in_dim, d.tokens == 1 ? "one token" : fmt::format("{} tokens", d.tokens), d.tokens == 1 ? "BLAS sgemv" : "BLAS sgemm",
                    kv::dense_blas_core(),
                    d.format == kv::DenseFormat::F32 ? "" : ", dequantized to f32 panels first",
                    d.tokens == 1 && d.residency == cases::Residency::Cold ? ", weight copies cycled past the caches" : "");
    (d.tokens == 1 ? cpu.dense_decode_gmac_per_s : cpu.dense_gmac_per_s)[static_cast<std::size_t>(slot)] = measured(rate, "GMAC/s", how);
    c.say(fmt::format("dense {} ({} tokens): {:.2f} GMAC/s", kv::dense_format_name(d.format), d.tokens, rate));
  }
  // kvbench's backends have no q4 dense layers: the q8 rate stands in, and says so.
  for (auto* rates : {&cpu.dense_decode_gmac_per_s, &cpu.dense_gmac_per_s}) {
    Quantity q8 = (*rates)[static_cast<std::size_t>(kv::soc::WeightFormat::Q8)];
    q8.derived += "; derived: kvbench has no q4 dense layers, so the q8 rate stands in";
    (*rates)[static_cast<std::size_t>(kv::soc::WeightFormat::Q4)] = q8;
  }
}

}  // namespace kvbench::calibration
