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
