#include <catch2/catch.hpp>

#include <fstream>
#include <set>
#include <sstream>

#include "metric_table.h"
#include "telemetry.h"

using namespace kvbench;

TEST_CASE("docs/metrics.md is the metric table's glossary", "[metrics]") {
  std::ifstream in(std::string(KVBENCH_SOURCE_DIR) + "/docs/metrics.md", std::ios::binary);
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  // Regenerate with: build/bin/kvbench metrics > docs/metrics.md
  CHECK(text.str() == metric_glossary_markdown());
}

TEST_CASE("the metric table names every metric once, with a unit, a clock, a direction and a description", "[metrics]") {
  std::set<std::string> names;
  for (const MetricDef& d : metric_table()) {
    CAPTURE(d.name);
    CHECK(names.insert(d.name).second);
    CHECK_FALSE(d.unit.empty());
    CHECK(d.description.size() > 20);
    CHECK(find_metric(d.name) == &d);
    // Host timings may be extrapolated from sampled layers; noise and wall time are never gated.
    if (d.name.rfind("noise_", 0) == 0 || d.name == "case_wall_ms") CHECK(d.better == Better::None);
  }
  CHECK(find_metric("no_such_metric") == nullptr);
  CHECK_THROWS(metric("no_such_metric"));
  // Every span of every phase, named from the one span enum.
  for (const char* phase : {"prefill", "decode"}) {
    for (int s = 0; s < kv::kSpanCount; ++s) {
      CHECK(find_metric(span_metric_name(phase, kv::span_name(static_cast<kv::Span>(s)))) != nullptr);
    }
  }
  CHECK(metric("span_decode_quality_ms").better == Better::None);
  CHECK(metric("ttft_ms").clock == Clock::Host);
  CHECK(metric("ttft_ms").description.find("no model compute") != std::string::npos);
  CHECK(metric("prefill_tps").better == Better::Higher);
  for (const char* name : {"l2_errors", "pressure_danger_steps", "requantized_pages", "l1_overflow_events"}) {
    CHECK(metric(name).clock == Clock::Exact);
    CHECK(metric(name).better == Better::Lower);
  }
}

TEST_CASE("CPU-time rows: their own clock, never modelled, and the counterpart of every gated wall-time span", "[metrics]") {
  for (const char* phase : {"prefill", "decode"}) {
    for (const char* part : kWorkSpans) {
      CAPTURE(phase, part);
      const MetricDef& cpu = metric(span_cpu_metric_name(phase, part));
      CHECK(cpu.clock == Clock::Cpu);
      CHECK(cpu.better == Better::Lower);
      CHECK_FALSE(cpu.modelled);
      CHECK(metric(span_instructions_metric_name(phase, part)).clock == Clock::Cpu);
      CHECK_FALSE(contention_sensitive(cpu));
    }
  }
  CHECK(std::string(clock_name(Clock::Cpu)) == "cpu");
  CHECK(parse_clock("cpu") == Clock::Cpu);
  CHECK(cpu_counterpart("tpot_ms_p99") == "span_decode_total_cpu_ms");
  CHECK(cpu_counterpart("decode_tps") == "span_decode_total_cpu_ms");
  CHECK(cpu_counterpart("ttft_ms") == "span_prefill_total_cpu_ms");
  CHECK(cpu_counterpart("span_decode_select_ms") == "span_decode_attend_cpu_ms");
  CHECK(cpu_counterpart("span_prefill_kv_quant_ms") == "span_prefill_append_cpu_ms");
  CHECK(cpu_counterpart("span_decode_dma_wait_ms").empty());  // waiting is not work
  CHECK(cpu_counterpart("kv_bytes_per_token").empty());
  // Every counterpart names a row of the table.
  for (const MetricDef& d : metric_table()) {
    const std::string cpu = cpu_counterpart(d.name);
    if (!cpu.empty()) CHECK(find_metric(cpu) != nullptr);
  }
  // Waiting for a core lengthens wall times, not bytes or the noise figures themselves.
  CHECK(contention_sensitive(metric("tpot_ms_p50")));
  CHECK_FALSE(contention_sensitive(metric("peak_rss_bytes")));
  CHECK_FALSE(contention_sensitive(metric("noise_run_queue_share")));
}
