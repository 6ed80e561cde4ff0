#include <catch2/catch.hpp>

#include <set>
#include <sstream>

#include "callgrind_profile.h"
#include "metric_table.h"
#include "runtime/error.h"
#include "sim_counts.h"

using namespace kvbench;
using kvbench::sim::WorkCounts;

namespace {

sim::CallgrindProfile profile(const std::string& body, const std::string& summary) {
  std::istringstream in("events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw\nsummary: " + summary + "\n" + body);
  return sim::parse_callgrind(in, "dump");
}

const char* const kRegions =
    "fn=kvbench_sim_prefill_append\n0 100 0 0 1 2 3 1 1 1\n"
    "fn=kvbench_sim_prefill_attend\n0 1000 0 0 0 10 0 0 2 0\n"
    "fn=kvbench_sim_decode_attend\n0 50 0 0 0 1 0\n";

}  // namespace

TEST_CASE("The regions' counts come from their functions, and must add up to the dump's total", "[sim]") {
  const sim::RegionCounts c = sim::region_counts(profile(kRegions, "1150 0 0 1 13 3 1 3 1"), "dump");
  const WorkCounts& append = c[0][static_cast<int>(kv::sim::WorkPart::Append)];
  CHECK(append.instructions == 100);
  CHECK(append.l1_misses == 6);  // I1mr + D1mr + D1mw
  CHECK(append.ll_misses == 3);  // ILmr + DLmr + DLmw
  CHECK(append.cycles() == 100 + 10 * 6 + 100 * 3);
  CHECK(c[1][static_cast<int>(kv::sim::WorkPart::Attend)].instructions == 50);
  CHECK(c[1][static_cast<int>(kv::sim::WorkPart::Model)].instructions == 0);
  // Counts outside the regions mean collection was on where it should not be.
  CHECK_THROWS_WITH(sim::region_counts(profile(kRegions, "1151 0 0 1 13 3 1 3 1"), "dump"),
                    Catch::Contains("inside the kvbench_sim_* regions"));
  // A dump without the cache simulation cannot give misses.
  std::istringstream ir_only("events: Ir\nfn=kvbench_sim_decode_attend\n0 5\n");
  CHECK_THROWS_WITH(sim::region_counts(sim::parse_callgrind(ir_only, "dump"), "dump"), Catch::Contains("--cache-sim=yes"));
}

TEST_CASE("The sim figures are every sim metric of the table: totals of the parts, NULL where a phase did not run", "[sim]") {
  sim::RegionCounts c{};
  c[1][static_cast<int>(kv::sim::WorkPart::Append)] = {10, 1, 0};
  c[1][static_cast<int>(kv::sim::WorkPart::Attend)] = {90, 4, 1};
  const std::vector<MetricRecord> figures = sim::sim_metrics(c, {3, false, true, true});
  std::set<std::string> names, table;
  for (const MetricDef& d : metric_table()) {
    if (d.clock == Clock::Sim) table.insert(d.name);
  }
  for (const MetricRecord& m : figures) {
    names.insert(m.name);
    CHECK(m.clock == Clock::Sim);
    CHECK(m.repetition == 3);
    CHECK(m.unit == "count");
  }
  CHECK(names == table);
  const auto find = [&](const std::string& name) -> const MetricRecord& {
    for (const MetricRecord& m : figures) {
      if (m.name == name) return m;
    }
    FAIL("no " << name);
    return figures.front();
  };
  CHECK(find("span_decode_total_sim_instructions").value == 100.0);
  CHECK(find("span_decode_total_sim_l1_misses").value == 5.0);
  CHECK(find("span_decode_attend_sim_cycles").value == 90.0 + 40.0 + 100.0);
  CHECK_FALSE(find("span_prefill_total_sim_instructions").value.has_value());
  CHECK(find("span_prefill_total_sim_instructions").na_reason == "no prefill phase");
  CHECK(find("span_decode_model_compute_sim_instructions").na_reason.find("synthetic generator") != std::string::npos);
}

TEST_CASE("A sim run's repetition keeps exact and modelled figures and leaves host and cpu ones NULL with the reason", "[sim]") {
  RepetitionRecord record;
  for (const Clock clock : {Clock::Host, Clock::Cpu, Clock::Exact, Clock::Model}) {
    MetricRecord m;
    m.name = std::string("m_") + clock_name(clock);
    m.value = 1.5;
    m.clock = clock;
    m.noisy = true;
    record.metrics.push_back(m);
  }
  MetricRecord counted;
  counted.name = "span_decode_total_sim_instructions";
  counted.value = 7.0;
  counted.clock = Clock::Sim;
  sim::record_sim_clock(record, {counted}, "a sim run");
  REQUIRE(record.metrics.size() == 5);
  for (const MetricRecord& m : record.metrics) {
    CAPTURE(m.name);
    if (m.clock == Clock::Host || m.clock == Clock::Cpu) {
      CHECK_FALSE(m.value.has_value());
      CHECK(m.na_reason == "a sim run");
      CHECK_FALSE(m.noisy);
    } else {
      CHECK(m.value.has_value());
    }
  }
}
