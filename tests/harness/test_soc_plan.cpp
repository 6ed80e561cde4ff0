// A SoC's pricing decision: priced from the host run, rerun with its capacities, or noted as not
// fitting; and the repetition it stores: exact figures always, host figures on the host's case only.
#include <catch2/catch.hpp>

#include <algorithm>

#include "metric_table.h"
#include "soc_plan.h"
#include "soc_profiles.h"

namespace {

using namespace kvbench;

constexpr double kMiB = 1024.0 * 1024.0;

// The built-in host profile with a model budget and reserve of our choosing.
kv::soc::SocProfile soc(double budget_mib, double reserve_mib = 64.0) {
  kv::soc::SocProfile p = load_soc_profile("host", "");
  p.name = "made-up";
  p.model_budget_bytes.value = budget_mib * kMiB;
  p.runtime_reserve_bytes.value = reserve_mib * kMiB;
  return p;
}

bool has_metric(const RepetitionRecord& r, const std::string& name) {
  return std::any_of(r.metrics.begin(), r.metrics.end(), [&](const MetricRecord& m) { return m.name == name; });
}

bool has_series(const RepetitionRecord& r, const std::string& name) {
  return std::any_of(r.series.begin(), r.series.end(), [&](const auto& s) { return s.first == name; });
}

}  // namespace

TEST_CASE("a SoC holds the weights only with its runtime reserve beside them", "[soc-plan]") {
  CHECK(holds_weights(soc(1000, 100), 900 * kMiB));
  CHECK_FALSE(holds_weights(soc(1000, 100), 900 * kMiB + 1));
  const RunEvent note = weights_do_not_fit(soc(1000, 100), 950 * kMiB);
  CHECK(note.kind == EventKind::DoesNotFit);
  CHECK(note.text.find("made-up") != std::string::npos);
}

TEST_CASE("a SoC whose KV budget holds the host run's peak prices the host run", "[soc-plan]") {
  kv::MemoryConfig memory;
  memory.l0_bytes = 0;
  const SocPlan plan = plan_soc(soc(1000), 400 * kMiB, 500 * kMiB, memory, 0);  // budget 536 MiB >= 500
  CHECK_FALSE(plan.rerun);
  CHECK_FALSE(plan.note);
}

TEST_CASE("a SoC with a smaller KV budget reruns capped at it, or at the policy's cap when that is smaller", "[soc-plan]") {
  kv::MemoryConfig memory;
  memory.l0_bytes = 0;
  SocPlan plan = plan_soc(soc(1000), 400 * kMiB, 800 * kMiB, memory, 0);
  REQUIRE(plan.rerun);
  CHECK(plan.capacities.l1_bytes == static_cast<std::size_t>(536 * kMiB));
  CHECK(plan.capacities.l0_bytes == 0);
  REQUIRE(plan.note);
  CHECK(plan.note->kind == EventKind::CapacityRerun);
  memory.l1_bytes = static_cast<std::size_t>(300 * kMiB);
  plan = plan_soc(soc(1000), 400 * kMiB, 800 * kMiB, memory, 0);
  REQUIRE(plan.rerun);
  CHECK(plan.capacities.l1_bytes == memory.l1_bytes);
}

TEST_CASE("a SoC whose KV budget cannot hold what no demotion frees does not rerun", "[soc-plan]") {
  kv::MemoryConfig memory;
  memory.l0_bytes = 0;
  const auto floor = static_cast<std::uint64_t>(600 * kMiB);
  const SocPlan plan = plan_soc(soc(1000), 400 * kMiB, 800 * kMiB, memory, floor);
  CHECK_FALSE(plan.rerun);
  CHECK(plan.capacities.l1_bytes == 0);
  REQUIRE(plan.note);
  CHECK(plan.note->kind == EventKind::DoesNotFit);
}

TEST_CASE("a SoC with a smaller L0 than the policy's reruns with its own", "[soc-plan]") {
  kv::soc::SocProfile p = soc(4000);
  p.l0.capacity_bytes.value = 256 * 1024;
  kv::MemoryConfig memory;
  memory.l0_bytes = 1 << 20;
  const SocPlan plan = plan_soc(p, 400 * kMiB, 100 * kMiB, memory, 0);
  REQUIRE(plan.rerun);
  CHECK(plan.capacities.l0_bytes == 256u * 1024u);
  CHECK(plan.capacities.l1_bytes == 0);  // the policy's
}

TEST_CASE("a priced repetition keeps host figures on the host's case only", "[soc-plan]") {
  EngineRun run;
  run.record.repetition = 2;
  MetricRecord exact;
  exact.repetition = 2;
  exact.name = "token_drop_ratio";
  exact.value = 0.5;
  exact.clock = Clock::Exact;
  MetricRecord host = exact;
  host.name = "case_wall_ms";
  host.clock = Clock::Host;
  run.record.metrics = {exact, host};
  run.record.series = {{"tpot_ms", {1.0, 2.0}}, {"attn_mass_recall_by_request", {0.9}}};
  const kv::soc::SocProfile p = soc(4000);
  Pricing how;
  how.profile = &p;
  how.notes.push_back(note_event(EventKind::CapacityRerun, "made-up: reran"));
  how.rerun = true;

  how.host_case = false;
  const PricedRepetition other = priced_repetition(run, how);
  CHECK(other.record.repetition == 2);
  CHECK(has_metric(other.record, "token_drop_ratio"));
  CHECK_FALSE(has_metric(other.record, "case_wall_ms"));
  CHECK_FALSE(has_series(other.record, "tpot_ms"));
  CHECK(has_series(other.record, "attn_mass_recall_by_request"));
  const auto rerun = std::find_if(other.record.metrics.begin(), other.record.metrics.end(),
                                  [](const MetricRecord& m) { return m.name == "capacity_rerun"; });
  REQUIRE(rerun != other.record.metrics.end());
  CHECK(rerun->value == Approx(1.0));
  REQUIRE_FALSE(other.record.events.empty());
  CHECK(other.record.events.front().kind == EventKind::CapacityRerun);
  CHECK(std::any_of(other.record.metrics.begin(), other.record.metrics.end(), [](const MetricRecord& m) { return m.clock == Clock::Model; }));

  how.host_case = true;
  const PricedRepetition own = priced_repetition(run, how);
  CHECK(has_metric(own.record, "case_wall_ms"));
  CHECK(has_series(own.record, "tpot_ms"));
}
