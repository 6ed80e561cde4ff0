// The metric table: every scalar a case repetition records - name, unit, clock, which way is
// better, whether it may be extrapolated from sampled layers, and what it covers. It is the one
// source of the recorded names and their units and clocks, the checks that every name is
// recorded (a value or NULL with a reason), the summary's columns, the gate's directions and
// the glossary (`kvbench metrics`, docs/metrics.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvbench {

// The clock a figure carries: measured here, priced by a SoC profile, or timing-independent.
enum class Clock : std::uint8_t { Host, Model, Exact };
const char* clock_name(Clock clock);

// Which way a change is an improvement; `none` is never gated (noise shares, wall time).
enum class Better : std::uint8_t { Lower, Higher, None };
const char* better_name(Better better);

struct MetricDef {
  std::string name;
  std::string unit;
  Clock clock = Clock::Exact;
  Better better = Better::None;
  bool extrapolable = false;  // scaled from sampled layers or probed chunks where that happened
  std::string description;    // what it covers, and what it does not
  // Also recorded on the model clock (priced by the case's SoC profile) under the same name.
  bool modelled = false;
};

// In recording order.
const std::vector<MetricDef>& metric_table();
// nullptr for a name the table does not hold.
const MetricDef* find_metric(std::string_view name);
// The definition of a name the code records; a name missing from the table is a bug.
const MetricDef& metric(std::string_view name);

// A stored figure is keyed by (name, clock). As one string: the name alone on the metric's own
// clock, `name@model` (or @host, @exact) on another - how the reader, the gate, `show` and
// exports spell a key.
struct MetricKey {
  std::string name;
  Clock clock = Clock::Exact;
};
std::string metric_key(std::string_view name, Clock clock);
// The name's own clock when the key has no @; std::nullopt for an unknown @clock.
std::optional<MetricKey> parse_metric_key(std::string_view key);
std::optional<Clock> parse_clock(std::string_view name);
// The metric table's row for a key's name (nullptr when the name is not in the table).
const MetricDef* find_metric_key(std::string_view key);
// A value of a metric key in human units ("-" for none), as tables and reports print it.
std::string metric_value_text(const std::optional<double>& value, std::string_view key);

// span_<phase>_<span>_ms.
std::string span_metric_name(std::string_view phase, std::string_view span);

// The glossary as Markdown: one table row per metric (docs/metrics.md is this text).
std::string metric_glossary_markdown();

}  // namespace kvbench
