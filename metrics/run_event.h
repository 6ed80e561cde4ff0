// One typed description of every event a case repetition records, from the engine's telemetry
// to the store, the degradation summary and the report: its kind and its fields as values.
// Events are stored as their fields (JSON, event_data()) beside a line for people (describe());
// readers take the fields and never parse the line back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "memory/memory_events.h"
#include "telemetry.h"

namespace kvbench {

enum class EventKind : std::uint8_t {
  Kernel,           // a kernel path an attention call took, once per path
  BudgetChange,     // the sparse budget changed (danger tightened it)
  TokenDropped,     // a critical token the plan left out (quality checks)
  // The memory pool's (kv::MemoryEvent): pressure transitions and degradations.
  Pressure,
  L2Failed,
  L2Full,
  BudgetTightened,  // stored by runs of earlier versions only: a budget change is one BudgetChange now
  Requantized,
  L1Overflow,
  SelectionShift,
  // The runner's.
  EventsTruncated,  // events over the per-repetition cap were not stored
  DoesNotFit,       // a SoC's budget cannot hold the case (a pricing note)
  CapacityRerun,    // the engine ran again with a SoC's capacities (a pricing note)
  PinnedOnly,       // the sparse budget keeps no middle page, allowed by the policy (a degradation)
  Other,            // a kind this kvbench does not know (a newer writer), or older text it cannot
                    // read as fields: its name and text are kept
};

// The stored name ("pressure", "budget_change", ...); event_kind() is its inverse (Other for a
// name it does not know).
std::string_view event_kind_name(EventKind kind);
EventKind event_kind(std::string_view name);

// A sparse budget: a fraction of the context, or pages when given in pages (pages > 0).
struct Budget {
  double fraction = 0.0;
  int pages = 0;
};

struct RunEvent {
  EventKind kind = EventKind::Other;
  std::int64_t step = 0;
  std::string other_kind;  // Other: the name as stored

  // Kernel
  kv::KernelKind kernel = kv::KernelKind::Decode;
  std::string isa;
  // BudgetChange
  Budget from_budget, to_budget;
  // TokenDropped
  int layer = 0, q_head = 0, position = 0;
  float weight = 0.0f;  // its exact attention weight
  // The memory pool's kinds (fields a database older than typed events did not keep read 0)
  kv::PressureLevel from = kv::PressureLevel::Safe, to = kv::PressureLevel::Safe;
  std::uint64_t l1_used_bytes = 0, l1_capacity_bytes = 0, pinned_bytes = 0, l2_live_bytes = 0, pages = 0;
  std::string reason;
  // EventsTruncated
  std::uint64_t count = 0;
  // DoesNotFit, CapacityRerun, PinnedOnly, Other: the note itself
  std::string text;

  std::string_view name() const { return kind == EventKind::Other ? std::string_view(other_kind) : event_kind_name(kind); }
};

RunEvent kernel_event(kv::KernelKind kernel, kv::Isa isa);
RunEvent budget_event(const kv::BudgetChange& change);
RunEvent token_dropped_event(const kv::TokenDropped& drop);
RunEvent memory_event(const kv::MemoryEvent& event);
RunEvent note_event(EventKind kind, std::string text);  // DoesNotFit, CapacityRerun, PinnedOnly
RunEvent truncated_event(std::uint64_t count);

// The event's fields as a JSON object (its kind and step are stored beside it).
std::string event_data(const RunEvent& event);
// An event from its stored kind, step and fields ({"text": ...} alone: Other, its name kept);
// throws kv::InputError("events", kind, reason) for fields that are not this kind's.
RunEvent parse_event(std::string_view kind, std::int64_t step, std::string_view data);
// One line for people ("safe->warning l1_used=2417472/2359296 L1 free at or below ...").
std::string describe(const RunEvent& event);
// "25%" or "40 pages".
std::string budget_text(const Budget& budget);

// Kinds that explain a degradation; they are stored even past the per-repetition cap.
bool is_degradation_event(EventKind kind);
const std::vector<EventKind>& degradation_event_kinds();

}  // namespace kvbench
