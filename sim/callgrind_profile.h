// One callgrind dump, read back: its events, the program's totals and every function's inclusive
// cost (its own lines plus the calls it made), per event. The format is callgrind's documented
// profile format (valgrind docs, "Callgrind Format Specification"): header lines (`events:`,
// `summary:`/`totals:`), then per function `fn=` blocks of cost lines and `calls=` lines, each
// followed by the call's inclusive cost. Compressed names (`fn=(12) name`, then `fn=(12)`) and
// compressed positions (`+3`, `-1`, `*`) are read; trailing zero events may be left out.
#pragma once

#include <cstdint>
#include <istream>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvbench::sim {

struct CallgrindProfile {
  std::vector<std::string> events;  // "Ir", "Dr", "Dw", "I1mr", ...
  std::vector<std::uint64_t> totals;  // per event: `summary:` (or `totals:`)
  // Per function name, per event: the cost of its own lines plus every call it made.
  std::map<std::string, std::vector<std::uint64_t>> inclusive;
  std::map<std::string, std::string> descriptions;  // `desc:` lines ("I1 cache" -> "32768 B, 64 B, 8-way associative")

  // The index of an event, nothing when the dump did not record it.
  std::optional<std::size_t> event_index(std::string_view name) const;
  // One event of a cost vector (0 for an event the dump did not record).
  std::uint64_t event(const std::vector<std::uint64_t>& costs, std::string_view name) const;
  // A function's inclusive cost (zeros when it never ran while collection was on).
  std::vector<std::uint64_t> function(const std::string& name) const;
};

// Throws kv::InputError(`where`, "line N", reason) for text that is not a callgrind profile.
CallgrindProfile parse_callgrind(std::istream& in, const std::string& where);
// The file at `path` (InputError naming it when it cannot be read).
CallgrindProfile read_callgrind(const std::string& path);

}  // namespace kvbench::sim
