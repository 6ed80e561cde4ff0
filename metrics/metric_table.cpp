#include "metric_table.h"

#include <algorithm>
#include <stdexcept>
#include <unordered_map>

#include "human_units.h"
#include "telemetry.h"

namespace kvbench {

namespace {

constexpr Clock H = Clock::Host;
constexpr Clock E = Clock::Exact;
constexpr Clock C = Clock::Cpu;
constexpr Clock S = Clock::Sim;
constexpr Better Lo = Better::Lower;
constexpr Better Hi = Better::Higher;
constexpr Better No = Better::None;

const char* const kSynthHost =
    " On the synthetic backend this is the engine's work alone (append, quantization, page management, selection and "
    "attention of every layer; sampled layers scaled, flagged extrapolated) with no model compute: no projections, MLP "
    "or logits. On the llama backend it is the whole forward pass. Quality checks and the reference model are never "
    "inside it.";

std::string span_description(kv::Phase phase, kv::Span span) {
  const std::string p(kv::phase_name(phase));
  switch (span) {
    case kv::Span::Total: return "The " + p + " phase's timed work; ttft_ms and tpot_ms_* are made of it." + kSynthHost;
    case kv::Span::AttnCompute: return "Attention kernels during " + p + ": attention calls less selection and L2 waits.";
    case kv::Span::KvQuant: return "Sealing pages during " + p + ": quantization and page summaries.";
    case kv::Span::PageAlloc: return "Allocating sealed pages during " + p + " (includes demotions under memory pressure).";
    case kv::Span::Select: return "Sparse selection during " + p + ": page scores and the plan.";
    case kv::Span::DmaWait: return "Waiting for pages from L2 during " + p + ".";
    case kv::Span::ModelCompute:
      return "The model outside attention during " + p + " (llama backend; NULL on the synthetic backend, whose generator stands in for it).";
    case kv::Span::Quality:
      return "Measurement work during " + p +
             ": exact-attention quality checks and the llama backend's f32 reference model. Outside every timed figure; "
             "it shows what the checks cost, not the engine.";
  }
  return "";
}

std::vector<MetricDef> build_table() {
  std::vector<MetricDef> t = {
      {"ttft_ms", "ms", H, Lo, true,
       std::string("Prompt arrival to the first generated token's logits, mean over requests with a prompt: a long first prompt "
                   "and short follow-ups average to a time no request took (ttft_first_request_ms and ttft_followup_ms_p50 "
                   "say what each waited).") + kSynthHost +
           " A synthetic prompt (or turn) whose prefill ends by position 2048 attends every query; past it, 64-query"
           " probes are fitted to the rest (extrapolated)."},
      {"prefill_tps", "tokens/s", H, Hi, true, "Prompt tokens / prefill time (span_prefill_total_ms): the same work as ttft_ms."},
      {"tpot_ms_p50", "ms", H, Lo, true, std::string("Median per-decode-token latency.") + kSynthHost},
      {"tpot_ms_p90", "ms", H, Lo, true, "90th percentile (nearest rank) of the per-decode-token latency; covers what tpot_ms_p50 covers."},
      {"tpot_ms_p99", "ms", H, Lo, true, "99th percentile (nearest rank) of the per-decode-token latency; covers what tpot_ms_p50 covers."},
      {"decode_tps", "tokens/s", H, Hi, true, "Decode tokens / decode time (span_decode_total_ms); covers what tpot_ms_p50 covers."},
      {"goodput", "ratio", H, Hi, false,
       "Share of requests that met the workload's ttft and tpot targets (llama backend; the synthetic backend runs no model)."},
      {"ttft_first_request_ms", "ms", H, Lo, true,
       "TTFT of the first request that carries a prompt: rag's first request (its "
       "documents and question), codebase's repository context, roleplay's opening turn of its opening session (system prompt "
       "and first message), multimodal's text and images up to the first question; covers what ttft_ms covers."},
      {"ttft_followup_ms_p50", "ms", H, Lo, true,
       "Median (nearest rank) TTFT of the requests with a prompt after the first: rag's later requests, codebase's and "
       "multimodal's questions, roleplay's later turns; NULL where a run has one request; covers what ttft_ms covers."},
      {"ttft_first_turn_ms", "ms", H, Lo, true,
       "Roleplay with sessions >= 2: mean TTFT of the first turn of sessions 2..N, whose system prompt an earlier session may "
       "have left in the prefix cache; covers what ttft_ms covers, plus the prefix cache's lookup, sharing and caching."},
      {"ttft_repeat_request_ms", "ms", H, Lo, true,
       "Rag with requests >= 2: mean TTFT of requests 2..N, each a new sequence over the documents request 1 read; covers "
       "what ttft_first_turn_ms covers. Request 1's own TTFT is the first value of the ttft_ms_by_request series."},
      {"prefix_hit_tokens", "tokens", E, Hi, false,
       "Prompt tokens that came from the prefix cache instead of a prefill, over every request (policy prefix_cache; "
       "whole pages, and never a prompt's last token, which is always computed for its logits)."},
      {"prefix_hit_rate", "ratio", E, Hi, false,
       "prefix_hit_tokens / prompt tokens of the requests that looked a prefix up (each sequence's first prompt)."},
      {"prefix_cached_bytes", "bytes", E, No, true,
       "Bytes the prefix cache names at the end of the repetition: its pages at their full size and its copies of their "
       "summaries, whole model (sampled layers scaled). Those pages count in the tiers' figures too."},
      {"prefix_evictions", "pages", E, Lo, true,
       "Page positions the prefix cache dropped (each one page per layer and kv head)."},
      {"spec_accept_rate", "ratio", E, Hi, false,
       "Speculative decoding (policy speculative): accepted / proposed draft tokens. On the llama backend the draft's greedy "
       "proposals against the target's greedy choices (measured); on the synthetic backend each proposal matches with the "
       "policy's accept_rate, drawn from the suite's seed: configured, not measured."},
      {"spec_tokens_per_step", "tokens", E, Hi, false,
       "Speculative decoding: tokens committed per verify step, the target's own token included (1 .. k + 1); measured on "
       "the llama backend, on the synthetic backend it follows from the configured accept_rate."},
      {"spec_draft_ms", "ms", H, Lo, true,
       "Speculative decoding: the draft's work over the decode phase, catch-up steps included: on the synthetic backend its "
       "appends and attention (sampled layers scaled), on the llama backend its whole forward passes; part of "
       "span_decode_total_ms."},
      {"spec_verify_ms", "ms", H, Lo, true,
       "Speculative decoding: the verify steps' work (k + 1 tentative tokens appended and attended in one multi-query call "
       "per layer; on the llama backend the model's forward pass too) and their commits and rollbacks; part of "
       "span_decode_total_ms."},
      {"spec_draft_kv_bytes", "bytes", E, Lo, true,
       "Speculative decoding: peak sealed bytes of the draft's own copy of the context in its draft formats, whole model "
       "(sampled layers scaled); not part of peak_l1_bytes and under no tier cap. 0 for a layers:N draft, which reads and "
       "writes the target's own pages (its tentative tokens count in peak_l1_bytes)."},
      {"peak_l0_bytes", "bytes", E, Lo, false, "Most bytes one attention call staged through the L0 arena (a per-step staging arena, not scaled)."},
      {"peak_l1_bytes", "bytes", E, Lo, true,
       "Peak L1 (DRAM) occupancy of the whole model's KV: sealed page frames, residual and page summaries (sampled layers "
       "scaled). Never above the policy's l1_bytes cap."},
      {"peak_l2_bytes", "bytes", E, Lo, true, "Peak L2 segment bytes on disk for the whole model (sampled layers scaled)."},
      {"peak_rss_bytes", "bytes", H, Lo, false, "Peak resident set of the process during the repetition (generator and checks included)."},
      {"kv_bytes_per_token", "bytes", E, Lo, false, "Stored KV bytes per token over all layers and kv heads (sealed page layout)."},
      {"kv_compression_ratio", "ratio", E, Hi, false, "F16 page bytes per token / kv_bytes_per_token."},
      {"visual_kv_bytes_per_image", "bytes", E, Lo, false,
       "Stored KV bytes of the pages holding one image's tokens, over all layers and kv heads (whole pages, shared with text where an image does not start on a fresh page), mean over the case's images. "
       "With a visual block that names formats of its own the pages the image fills alone are in those (visual.k_format, v_format, v_group); every other page in the policy's."},
      {"visual_pages_resident", "pages", E, No, true,
       "An image's whole pages (read-only with a visual block; a last page shared with text is not one) with an L1 frame "
       "after each decode attention call, mean over those calls, every kv head of the whole model (sampled layers scaled); "
       "pages the prefix cache holds count too. Only a policy with a visual block tells image pages apart; without an L1 "
       "cap every image page is resident."},
      {"swap_in_bytes", "bytes", E, Lo, true, "Page bytes loaded from L2, demand and prefetch, for the whole model (sampled layers scaled)."},
      {"swap_out_bytes", "bytes", E, Lo, true, "Page bytes demoted to L2 for the whole model (sampled layers scaled)."},
      {"l2_bytes_written", "bytes", E, Lo, true,
       "Device bytes written to L2 (padding and compaction included) for the whole model (sampled layers scaled)."},
      {"l2_compaction_bytes", "bytes", H, No, true,
       "Live page bytes compaction rewrote to free mostly dead L2 segments (part of l2_bytes_written); when it runs depends on the writer thread, so not gated (sampled layers scaled)."},
      {"swap_in_gb_per_s", "GB/s", H, Hi, false, "swap_in_bytes over the time spent reading L2 (decimal GB/s)."},
      {"swap_out_gb_per_s", "GB/s", H, Hi, false, "l2_bytes_written over the time spent writing L2 (decimal GB/s)."},
      {"prefetch_hit_rate", "ratio", E, Hi, false, "Pages a step needed from L2 that a prefetch had brought / all pages it needed from L2."},
      {"l1_cache_hit_rate", "ratio", E, Hi, false, "Reads of pages with an L2 copy served by an L1 copy / all such reads."},
      {"l1_cache_hit_rate_decode", "ratio", E, Hi, false,
       "l1_cache_hit_rate over decode steps only (a prompt's attention streams every page, most of them from L2 under a tight cap)."},
      {"write_amplification", "ratio", E, Lo, false,
       "Device bytes written to L2 (padding, compaction) / page bytes those writes carried; >= 1 by construction."},
      {"dma_wait_ms", "ms", H, Lo, true, "Time the decode and prefill paths waited for pages from L2 (sampled layers scaled)."},
      {"prefetch_bytes", "bytes", E, Lo, true, "Page bytes loaded from L2 by prefetch for the whole model (sampled layers scaled)."},
      {"prefetch_unused_bytes", "bytes", E, Lo, true,
       "Of prefetch_bytes, pages dropped, evicted or freed before any step read them (sampled layers scaled)."},
      {"selection_shifts", "count", E, No, true,
       "Decode steps (one per layer) that kept mostly pages their previous step did not (memory.selection_shift): question switches (sampled layers scaled)."},
      {"selection_shift_loads", "count", E, Lo, true,
       "Pages those steps loaded from L2 on demand: what a question switch cost the tiers (sampled layers scaled)."},
      {"first_step_pages_read", "count", E, Lo, true,
       "Sealed pages read by the first decode step after each prefill, every layer (sampled layers scaled)."},
      {"first_step_demand_loads", "count", E, Lo, true,
       "Of first_step_pages_read, pages that step had to load from L2 itself: what prediction from the prefill missed (sampled layers scaled)."},
      {"first_step_dma_wait_ms", "ms", H, Lo, true, "Time the first decode step after each prefill waited for pages from L2 (sampled layers scaled)."},
      {"prefetch_hit_rate_after_first", "ratio", E, Hi, false,
       "prefetch_hit_rate over the decode steps after the first one of each prefill (the first has no selection history)."},
      {"prefetch_hit_rate_predictable", "ratio", E, Hi, false,
       "Over the decode steps after the first: prefetch hits / (hits + demand loads of predictable pages). A load is unpredictable when its page was first selected at that step and no earlier query of the same kv head kept it or ranked it within the step's budget in pages."},
      {"next_layer_agreement", "ratio", E, No, false,
       "Of the pages a layer's decode step newly selected, the share the next executed layer read at the same step: how well one layer's question switch predicts the next's. Sampled layers lie far apart in the model and agree less than adjacent ones; below 0.75 (decayed over recent steps) nothing is prefetched across layers."},
      {"next_layer_predicted_pages", "count", E, No, true,
       "Pages prefetched for the next layer from a layer's newly selected ones, while next_layer_agreement (recent steps) was at least 0.75 (sampled layers scaled)."},
      {"dma_wait_after_first_ms", "ms", H, Lo, true, "dma_wait_ms of the decode steps after the first one of each prefill (sampled layers scaled)."},
      {"l2_read_ios", "count", H, No, true,
       "Read I/Os issued to the L2 device; adjacent pages queued together are one I/O, so the count depends on timing and is not gated (sampled layers scaled)."},
      {"l2_bytes_per_read_io", "bytes", H, No, false, "Device bytes read per L2 read I/O (alignment included); depends on timing, not gated."},
      {"l2_read_ios_per_decode_step", "count", H, No, true, "L2 read I/Os completed during decode, per decode token, every layer; depends on timing, not gated (sampled layers scaled)."},
      {"summary_index_bytes", "bytes", E, Lo, true,
       "Peak L1 bytes of the page-summary index (key bounds and means) that selection reads, part of peak_l1_bytes (sampled layers scaled)."},
      {"token_drop_ratio", "ratio", E, Lo, false, "Context tokens not attended, mean over decode steps, layers and kv heads."},
      {"attn_mass_recall", "ratio", E, Hi, false,
       "Exact attention mass held by the selected tokens, mean over sampled checks (synthetic backend: exact K/V)."},
      {"oracle_mass_recall", "ratio", E, Hi, false,
       "The most attention mass any selection of as many pages could hold: the ceiling of attn_mass_recall."},
      {"critical_miss_rate", "ratio", E, Lo, false, "Share of the exact top tokens (top_m per q head) that selection dropped, sampled checks."},
      {"oracle_critical_miss_rate", "ratio", E, Lo, false,
       "Share of the same top tokens that the oracle's pages (as many per kv head, the heaviest by exact mass) would drop; the oracle ranks pages by mass, not by these tokens, so a selection can drop fewer."},
      {"needle_recall", "ratio", E, Hi, false, "Planted needles kept (all their tokens) by every kv head that serves a question-answering head / needles present, over sampled checks of layers that have such a head. In a multimodal case every needle is a region of an image: image-needle recall."},
      {"visual_attn_mass_recall", "ratio", E, Hi, false,
       "Exact attention mass on image tokens held by the selected tokens / all the mass on image tokens (summed over q heads), mean over sampled checks of a context with images."},
      {"visual_oracle_mass_recall", "ratio", E, Hi, false,
       "The most image mass a selection of as many pages of each image per kv head could hold (each image's heaviest pages by exact image mass): the ceiling of visual_attn_mass_recall for the same pages per image. How pages are shared between images and text is oracle_mass_recall's ceiling."},
      {"visual_token_drop", "ratio", E, Lo, false, "Image tokens not attended, mean over kv heads and sampled checks of a context with images."},
      {"scale_drift_mean", "ratio", E, Lo, false, "Mean relative change of sealed pages' K channel ranges and V group absmax against prefill's reference."},
      {"scale_drift_max", "ratio", E, Lo, false, "Largest scale drift of any sealed page."},
      {"outlier_channel_ratio", "ratio", E, Lo, false, "K channels whose absmax exceeds the outlier factor x the median, mean over sealed pages."},
      {"clip_ratio", "ratio", E, Lo, false, "Share of values the reference scales would have clipped, mean over sealed pages."},
      {"nan_inf_count", "count", E, Lo, false, "Non-finite K/V inputs replaced by 0 (they never enter a page)."},
      {"attn_rel_error", "ratio", E, Lo, false,
       "||o - o*|| / ||o*|| of the attention output against exact attention over exact K/V, sampled checks (quantization and "
       "selection together)."},
      {"attn_cosine", "ratio", E, Hi, false, "cos(o, o*) of the attention output against exact attention, sampled checks."},
      {"l2_errors", "count", E, Lo, false, "L2 device faults (a failed write or read, ENOSPC): the tier stopped taking pages."},
      {"pressure_danger_steps", "count", E, Lo, false, "Steps that ended at the danger watermark (pinned pages fill L1)."},
      {"requantized_pages", "count", E, Lo, true, "Long-tail pages requantized to INT2 under danger (sampled layers scaled)."},
      {"l1_overflow_events", "count", E, Lo, false, "Episodes in which L1 went above its cap because nothing could be demoted."},
      {"noise_cpu_share", "ratio", H, No, false, "Share of the CPU other processes (and steal) took during the repetition."},
      {"noise_loadavg", "load", H, No, false, "1-minute load average at the end of the repetition."},
      {"noise_run_queue_ms", "ms", H, No, false,
       "Time this process's threads (the engine's pools, the driving thread, the migrator) were ready to run but waited for a "
       "core (run-queue wait from /proc/self/task/*/schedstat), summed over the threads, while the workload script ran."},
      {"noise_run_queue_share", "ratio", H, No, false,
       "noise_run_queue_ms / the repetition's wall time. Above the suite's noise_threshold the repetition is noisy and its "
       "wall-time figures are left out of comparisons (its CPU-time figures are kept)."},
      {"noise_cpu_probe_ms", "ms", C, No, false,
       "CPU time of one fixed reference job (the same in every build), run on as many threads as the engine's pool right "
       "before and right after the workload script, mean of the two. It grows when a busy neighbour slows the cores "
       "themselves (a sibling hardware thread, shared caches, a hypervisor's steal). A comparison whose repetitions were "
       "some noisy and some quiet judges CPU-time figures at the baseline's probe speed."},
      {"device_freq_mhz_start", "MHz", H, No, false,
       "Highest current frequency (cpufreq scaling_cur_freq) among the cores the engine may run on, right before the workload script (after the core-speed probe, which keeps the engine's share of them busy)."},
      {"device_freq_mhz_end", "MHz", H, No, false,
       "The same right after the script. More than 10% below device_freq_mhz_start and the repetition is flagged noisy (the cores slowed down)."},
      {"device_temp_c_start", "C", H, No, false, "Hottest thermal zone (sysfs thermal_zone*/temp), degrees Celsius, right before the workload script."},
      {"device_temp_c_end", "C", H, No, false, "Hottest thermal zone right after the workload script."},
      {"device_throttle_events", "count", H, No, false,
       "Thermal throttling the kernel counted on the engine's cores during the script (thermal_throttle/*_throttle_count; x86 kernels). Above 0 and the repetition is flagged noisy."},
      {"ppl", "ppl", E, Lo, false, "Perplexity of the tested KV configuration on the workload's text (llama backend)."},
      {"ppl_delta_pct", "%", E, Lo, false, "Perplexity change against the same model with an f32 cache and full attention, percent."},
      {"kl_mean", "nats", E, Lo, false, "Mean KL divergence of the next-token distribution from the f32-cache reference."},
      {"kl_p99", "nats", E, Lo, false, "99th percentile of that KL divergence."},
      {"kl_max", "nats", E, Lo, false, "Largest KL divergence at any scored position."},
      {"top1_agree", "ratio", E, Hi, false, "Positions whose most likely next token equals the reference's."},
      {"dp_rms", "prob", E, Lo, false, "RMS difference of the probability given to the true next token."},
  };
  for (kv::Phase phase : {kv::Phase::Prefill, kv::Phase::Decode}) {
    for (int s = 0; s < kv::kSpanCount; ++s) {
      const auto span = static_cast<kv::Span>(s);
      const bool quality = span == kv::Span::Quality;
      t.push_back({span_metric_name(kv::phase_name(phase), kv::span_name(span)), "ms", H, quality ? No : Lo,
                   !quality && span != kv::Span::ModelCompute, span_description(phase, span)});
    }
  }
  for (kv::Phase phase : {kv::Phase::Prefill, kv::Phase::Decode}) {
    const std::string p(kv::phase_name(phase));
    for (const char* part : kWorkSpans) {
      const std::string what = std::string(part) == "total"    ? "the " + p + " phase's timed work (span_" + p + "_total_ms)"
                               : std::string(part) == "attend" ? "the attention calls of " + p + " (selection, page waits, kernels)"
                               : std::string(part) == "append" ? "appending during " + p + " (sealing pages and allocating them)"
                                                               : "the model outside attention during " + p + " (llama backend; NULL on synthetic)";
      const std::string scope =
          " The calling thread's work outside parallel loops plus every pool thread's work inside their items; polling, "
          "sleeping and waiting for a core are not counted, so waiting for a core does not lengthen it (a neighbour that slows "
          "the core itself still can: see noise_cpu_probe_ms). Scaled like the wall "
          "time (sampled layers, probed prefill chunks).";
      t.push_back({span_cpu_metric_name(p, part), "ms", C, Lo, true, "CPU time the engine's threads spent on " + what + "." + scope});
      t.push_back({span_instructions_metric_name(p, part), "count", C, Lo, true,
                   "User-space instructions the engine's threads retired on " + what + " (perf_event_open; NULL where the "
                   "machine has no hardware counters)." + scope});
    }
  }
  for (kv::Phase phase : {kv::Phase::Prefill, kv::Phase::Decode}) {
    const std::string p(kv::phase_name(phase));
    for (const char* part : kWorkSpans) {
      const std::string which(part);
      const std::string what = which == "total"    ? "the " + p + " phase's engine work (its append, attend and, on llama, model parts)"
                               : which == "attend" ? "the attention calls of " + p + " (selection, L2 loads, kernels)"
                               : which == "append" ? "appending during " + p + " (sealing pages, allocating them, demotions and L2 writes)"
                                                   : "the model outside attention during " + p + " (llama backend; NULL on synthetic)";
      const std::string scope =
          " Counted by callgrind in a sim run (kvbench run --sim) on the one thread that runs the engine, L2 I/O included, "
          "over the work the repetition executed: the sampled layers and the probed prefill chunks as they ran, not scaled "
          "to the whole model. The same on an idle and a busy machine; absent outside sim runs.";
      t.push_back({span_sim_metric_name(p, part, "instructions"), "count", S, Lo, false,
                   "Instructions executed on " + what + "." + scope});
      t.push_back({span_sim_metric_name(p, part, "l1_misses"), "count", S, Lo, false,
                   "Simulated first-level cache misses on " + what + ": instruction fetches and data reads and writes that missed "
                   "a 32 KiB 8-way L1 (64-byte lines)." + scope});
      t.push_back({span_sim_metric_name(p, part, "ll_misses"), "count", S, Lo, false,
                   "Simulated last-level cache misses on " + what + " (an 8 MiB 16-way cache, 64-byte lines)." + scope});
      t.push_back({span_sim_metric_name(p, part, "cycles"), "count", S, Lo, false,
                   "Estimated cycles of " + what + ": instructions + " + std::to_string(kL1MissCycles) + " x L1 misses + " +
                       std::to_string(kLLMissCycles) + " x LL misses (KCachegrind's estimate, no branch simulation)." + scope});
    }
  }
  const Clock M = Clock::Model;
  t.push_back({"energy_mj_per_token", "mJ", M, Lo, true,
               "Modelled energy of one decode step (the cost model: bytes per tier, multiply-adds per precision and exponentials "
               "priced at the profile's energy figures, dense layers included), mean over decode steps."});
  t.push_back({"energy_mj_prefill", "mJ", M, Lo, true, "Modelled energy of a request's prefill, mean over requests with a prompt."});
  t.push_back({"fits_in_memory", "bool", M, Hi, false,
               "1 when weights + peak KV in L1 + the runtime reserve fit the profile's memory budget for one model, else 0."});
  t.push_back({"memory_headroom_bytes", "bytes", M, Hi, true,
               "The profile's model budget less weights, peak KV in L1 and the runtime reserve (negative: it does not fit)."});
  t.push_back({"capacity_rerun", "bool", E, No, false,
               "1 when the case's SoC could not hold what the host run held (its KV budget - model budget less weights and "
               "reserve - below the host run's peak L1, or a smaller L0), so the engine ran again with the SoC's capacities "
               "and this case's figures come from that run; 0 when the host run was priced as it is."});
  t.push_back({"case_wall_ms", "ms", H, No, false,
               "Wall time of the repetition here, generator, checks and reference included: sizes suites, not the engine."});
  // Figures the cost model also states on the model clock, under the same names.
  const std::vector<std::string> modelled = {"ttft_ms", "ttft_first_request_ms", "ttft_followup_ms_p50", "prefill_tps", "tpot_ms_p50", "tpot_ms_p90", "tpot_ms_p99", "decode_tps",
                                             "goodput", "dma_wait_ms"};
  for (MetricDef& d : t) {
    const bool span = d.clock == H && d.name.rfind("span_", 0) == 0 && d.name.find("_quality_") == std::string::npos &&
                      d.name.find("_page_alloc_") == std::string::npos;
    if (span || std::find(modelled.begin(), modelled.end(), d.name) != modelled.end()) d.modelled = true;
  }
  return t;
}

}  // namespace

const char* clock_name(Clock clock) {
  switch (clock) {
    case Clock::Host: return "host";
    case Clock::Model: return "model";
    case Clock::Exact: return "exact";
    case Clock::Cpu: return "cpu";
    case Clock::Sim: return "sim";
  }
  return "unknown";
}

const char* better_name(Better better) {
  switch (better) {
    case Better::Lower: return "lower";
    case Better::Higher: return "higher";
    case Better::None: return "none";
  }
  return "unknown";
}

std::string span_metric_name(std::string_view phase, std::string_view span) {
  return "span_" + std::string(phase) + "_" + std::string(span) + "_ms";
}

std::string span_cpu_metric_name(std::string_view phase, std::string_view part) {
  return "span_" + std::string(phase) + "_" + std::string(part) + "_cpu_ms";
}

std::string span_instructions_metric_name(std::string_view phase, std::string_view part) {
  return "span_" + std::string(phase) + "_" + std::string(part) + "_instructions";
}

std::string span_sim_metric_name(std::string_view phase, std::string_view part, std::string_view figure) {
  return "span_" + std::string(phase) + "_" + std::string(part) + "_sim_" + std::string(figure);
}

bool contention_sensitive(const MetricDef& def) {
  return def.clock == Clock::Host && def.better != Better::None && def.unit != "bytes";
}

std::string cpu_counterpart(std::string_view host_metric) {
  const MetricDef* def = find_metric(host_metric);
  if (def == nullptr || def->clock != Clock::Host) return "";
  const std::string name(host_metric);
  for (const char* phase : {"prefill", "decode"}) {
    const std::string p(phase), span = "span_" + p + "_";
    const bool phase_figure = p == "prefill" ? (name == "ttft_ms" || name == "prefill_tps" || name == "ttft_first_request_ms" ||
                                                name == "ttft_followup_ms_p50")
                                             : (name.rfind("tpot_ms_", 0) == 0 || name == "decode_tps");
    if (phase_figure || name == span + "total_ms") return span_cpu_metric_name(p, "total");
    if (name == span + "attn_compute_ms" || name == span + "select_ms") return span_cpu_metric_name(p, "attend");
    if (name == span + "kv_quant_ms" || name == span + "page_alloc_ms") return span_cpu_metric_name(p, "append");
    if (name == span + "model_compute_ms") return span_cpu_metric_name(p, "model_compute");
  }
  return "";
}

std::vector<std::string> sim_span_rows(std::string_view metric_key) {
  const std::optional<MetricKey> key = parse_metric_key(metric_key);
  if (!key || !measured_here(key->clock)) return {};
  const std::string& name = key->name;
  const auto total = [](const char* phase) { return span_sim_metric_name(phase, "total", "instructions"); };
  if (name.find("_quality_") != std::string::npos) return {};
  for (const char* phase : {"prefill", "decode"}) {
    if (name.rfind("span_" + std::string(phase) + "_", 0) == 0) return {total(phase)};
  }
  const std::string cpu = cpu_counterpart(name);
  if (!cpu.empty()) return {total(cpu.rfind("span_prefill_", 0) == 0 ? "prefill" : "decode")};
  static const std::vector<std::string> prefill = {"ttft_first_turn_ms", "ttft_repeat_request_ms"};
  static const std::vector<std::string> decode = {"spec_draft_ms", "spec_verify_ms"};
  static const std::vector<std::string> both = {"goodput", "dma_wait_ms", "first_step_dma_wait_ms", "dma_wait_after_first_ms",
                                                "swap_in_gb_per_s", "swap_out_gb_per_s"};
  const auto in = [&](const std::vector<std::string>& list) { return std::find(list.begin(), list.end(), name) != list.end(); };
  if (in(prefill)) return {total("prefill")};
  if (in(decode)) return {total("decode")};
  if (in(both)) return {total("prefill"), total("decode")};
  return {};
}

const std::vector<MetricDef>& metric_table() {
  static const std::vector<MetricDef> table = build_table();
  return table;
}

const MetricDef* find_metric(std::string_view name) {
  static const std::unordered_map<std::string_view, const MetricDef*> index = [] {
    std::unordered_map<std::string_view, const MetricDef*> m;
    for (const MetricDef& d : metric_table()) m.emplace(d.name, &d);
    return m;
  }();
  const auto it = index.find(name);
  return it == index.end() ? nullptr : it->second;
}

std::optional<Clock> parse_clock(std::string_view name) {
  for (Clock c : {Clock::Host, Clock::Model, Clock::Exact, Clock::Cpu, Clock::Sim}) {
    if (name == clock_name(c)) return c;
  }
  return std::nullopt;
}

std::string metric_key(std::string_view name, Clock clock) {
  const MetricDef* def = find_metric(name);
  if (def != nullptr && def->clock == clock) return std::string(name);
  return std::string(name) + "@" + clock_name(clock);
}

std::optional<MetricKey> parse_metric_key(std::string_view key) {
  const auto at = key.find('@');
  if (at == std::string_view::npos) {
    const MetricDef* def = find_metric(key);
    return MetricKey{std::string(key), def != nullptr ? def->clock : Clock::Exact};
  }
  const std::optional<Clock> clock = parse_clock(key.substr(at + 1));
  if (!clock) return std::nullopt;
  return MetricKey{std::string(key.substr(0, at)), *clock};
}

const MetricDef* find_metric_key(std::string_view key) { return find_metric(key.substr(0, key.find('@'))); }

const MetricDef& metric(std::string_view name) {
  const MetricDef* d = find_metric(name);
  if (d == nullptr) throw std::logic_error("metric table: no metric named " + std::string(name));
  return *d;
}

std::string metric_glossary_markdown() {
  std::string out =
      "# Metrics\n\n"
      "Every scalar a case repetition records. This page is generated from the metric table in code "
      "(`metrics/metric_table.cpp`; `kvbench metrics` prints it) and a test checks that they are equal.\n\n"
      "- **clock**: `host` measured on the machine that ran the harness; `model` priced by a SoC profile; `exact` "
      "counts, bytes and accuracy, which do not depend on timing; `cpu` the engine threads' CPU time and instructions "
      "here; `sim` the engine's work counted under Valgrind's callgrind in a sim run (`kvbench run --sim`, "
      "docs/gate.md). A figure is keyed by name and clock: `host, model` "
      "means the name is stored on both (the model one priced by the case's SoC profile from the engine's operation "
      "counts, docs/cost-model.md), spelt `name@model` where a key must name the clock.\n"
      "- **better**: the direction of an improvement; `none` is never gated.\n"
      "- **extrapolable**: scaled from sampled layers or probed prefill chunks when a case ran those; each such value "
      "is flagged `extrapolated` in the store.\n"
      "- A metric that does not apply to a case is stored as NULL with the reason (`na_reason`), never left out.\n\n"
      "| name | unit | clock | better | extrapolable | what it covers |\n"
      "|---|---|---|---|---|---|\n";
  for (const MetricDef& d : metric_table()) {
    out += "| `" + d.name + "` | " + d.unit + " | " + clock_name(d.clock) + (d.modelled ? ", model" : "") + " | " + better_name(d.better) + " | " +
           (d.extrapolable ? "yes" : "no") + " | " + d.description + " |\n";
  }
  return out;
}

std::string metric_value_text(const std::optional<double>& value, std::string_view key) {
  if (!value) return "-";
  const MetricDef* def = find_metric_key(key);
  return human_value(*value, def != nullptr ? def->unit : "");
}

}  // namespace kvbench
