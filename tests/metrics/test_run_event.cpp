// Typed events: every kind's fields survive the stored form (event_data -> parse_event) exactly,
// the line for people keeps the recorder's formats, a kind this kvbench does not know keeps its
// name and text, and stored fields that are not the kind's are refused, naming the kind.
#include <catch2/catch.hpp>

#include <string>

#include "run_event.h"
#include "runtime/error.h"

using namespace kvbench;

namespace {

RunEvent round_trip(const RunEvent& e) { return parse_event(e.name(), e.step, event_data(e)); }

}  // namespace

TEST_CASE("every event kind's fields survive the stored form", "[events]") {
  const RunEvent kernel = round_trip(kernel_event(kv::KernelKind::Prefill, kv::Isa::Avx2));
  CHECK(kernel.kind == EventKind::Kernel);
  CHECK(kernel.kernel == kv::KernelKind::Prefill);
  CHECK(describe(kernel) == "kernel_prefill_avx2");

  const RunEvent budget = round_trip(budget_event({12, 0.0625f, 0, 0.125f, 0}));
  CHECK(budget.step == 12);
  CHECK(budget.from_budget.fraction == static_cast<double>(0.125f));
  CHECK(budget.to_budget.fraction == static_cast<double>(0.0625f));
  CHECK(describe(budget) == "budget 12.5% -> 6.25%");
  CHECK(describe(round_trip(budget_event({3, 0.0f, 20, 0.0f, 40}))) == "budget 40 pages -> 20 pages");

  const RunEvent drop = round_trip(token_dropped_event({5, 1, 3, 1234, 0.000320f}));
  CHECK(drop.layer == 1);
  CHECK(drop.q_head == 3);
  CHECK(drop.position == 1234);
  CHECK(drop.weight == 0.000320f);
  CHECK(describe(drop) == "layer=1 q_head=3 position=1234 weight=0.000320");

  kv::MemoryEvent m;
  m.kind = kv::MemoryEvent::Kind::L2Failed;
  m.step = 9;
  m.from = kv::PressureLevel::Warning;
  m.to = kv::PressureLevel::Danger;
  m.l1_used_bytes = 2417472;
  m.l1_capacity_bytes = 2359296;
  m.pinned_bytes = 1000;
  m.l2_live_bytes = 2000;
  m.pages = 3;
  m.reason = "seg-0.kvl2: writing 4096 bytes at offset 8192/16384 failed: ENOSPC";
  const RunEvent failed = round_trip(memory_event(m));
  CHECK(failed.kind == EventKind::L2Failed);
  CHECK(failed.from == kv::PressureLevel::Warning);
  CHECK(failed.to == kv::PressureLevel::Danger);
  CHECK(failed.pinned_bytes == 1000);
  CHECK(failed.l2_live_bytes == 2000);
  CHECK(failed.pages == 3);
  CHECK(failed.reason == m.reason);
  CHECK(describe(failed) == "warning->danger l1_used=2417472/2359296 " + m.reason);
  CHECK(is_degradation_event(failed.kind));
  CHECK_FALSE(is_degradation_event(EventKind::Pressure));

  CHECK(round_trip(truncated_event(17)).count == 17);
  CHECK(describe(truncated_event(17)) == "17 more events not stored");
  const RunEvent note = round_trip(note_event(EventKind::DoesNotFit, "soc-a: the weights do not fit"));
  CHECK(note.kind == EventKind::DoesNotFit);
  CHECK(note.text == "soc-a: the weights do not fit");
  const RunEvent pinned = round_trip(note_event(EventKind::PinnedOnly, "budget_pages 2 of the 9 pages ..."));
  CHECK(pinned.kind == EventKind::PinnedOnly);
  CHECK(pinned.text == "budget_pages 2 of the 9 pages ...");
  CHECK(is_degradation_event(EventKind::PinnedOnly));
}

TEST_CASE("every kind's name maps back to the kind, and an unknown one keeps its name and text", "[events]") {
  for (EventKind kind : {EventKind::Kernel, EventKind::BudgetChange, EventKind::TokenDropped, EventKind::Pressure, EventKind::L2Failed,
                         EventKind::L2Full, EventKind::BudgetTightened, EventKind::Requantized, EventKind::L1Overflow,
                         EventKind::EventsTruncated, EventKind::DoesNotFit, EventKind::CapacityRerun, EventKind::PinnedOnly}) {
    CHECK(event_kind(event_kind_name(kind)) == kind);
  }
  const RunEvent future = parse_event("cache_warmed", 4, R"({"text": "from a newer kvbench"})");
  CHECK(future.kind == EventKind::Other);
  CHECK(future.name() == "cache_warmed");
  CHECK(describe(future) == "from a newer kvbench");
  // Older text the conversion could not read as fields (an early recorder's budget line).
  const RunEvent early = parse_event("budget_change", 9, R"({"text": "budget=0.050000"})");
  CHECK(early.kind == EventKind::Other);
  CHECK(early.name() == "budget_change");
  CHECK(describe(early) == "budget=0.050000");
  CHECK_FALSE(is_degradation_event(early.kind));
}

TEST_CASE("stored fields that are not the kind's are refused, naming the kind", "[events]") {
  CHECK_THROWS_WITH(parse_event("pressure", 1, "not json"), Catch::Contains("events: pressure"));
  CHECK_THROWS_WITH(parse_event("pressure", 1, R"({"from": "calm", "to": "safe"})"), Catch::Contains("'calm' is not a pressure level"));
  CHECK_THROWS_WITH(parse_event("token_dropped", 1, R"({"layer": 1})"), Catch::Contains("token_dropped"));
  CHECK_THROWS_WITH(parse_event("kernel", 1, "[1, 2]"), Catch::Contains("not a JSON object"));
}
