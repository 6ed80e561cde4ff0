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

// The clock a figure carries: measured here (wall time), priced by a SoC profile,
// timing-independent, the work the engine's threads did here (CPU time and instructions:
// measured, but not lengthened by waiting for a core on a busy machine), or that work counted
// under Valgrind's callgrind (instructions and simulated cache misses: the same on an idle and a
// loaded machine; recorded only by sim runs, `kvbench run --sim`).
enum class Clock : std::uint8_t { Host, Model, Exact, Cpu, Sim };
const char* clock_name(Clock clock);
// Host and cpu: measured on this machine (not comparable across CPUs, not kept for other SoCs).
inline bool measured_here(Clock clock) { return clock == Clock::Host || clock == Clock::Cpu; }
// The engine run's own work on this machine (host, cpu, sim): kept on the host's case only, not
// on the cases of other SoCs priced from the same run.
inline bool host_work(Clock clock) { return measured_here(clock) || clock == Clock::Sim; }

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

// The engine-work spans of a phase (clock cpu): total, attend (selection, waits and kernels of
// the attention calls), append (sealing and page allocation), model_compute (llama).
// span_<phase>_<part>_cpu_ms and span_<phase>_<part>_instructions.
inline constexpr const char* kWorkSpans[] = {"total", "attend", "append", "model_compute"};
std::string span_cpu_metric_name(std::string_view phase, std::string_view part);
std::string span_instructions_metric_name(std::string_view phase, std::string_view part);

// The sim clock's figures of each work span: callgrind's instructions, simulated first-level
// misses (instruction and data), last-level misses, and cycles estimated from them
// (kSimCycles). span_<phase>_<part>_sim_<figure>.
inline constexpr const char* kSimFigures[] = {"instructions", "l1_misses", "ll_misses", "cycles"};
std::string span_sim_metric_name(std::string_view phase, std::string_view part, std::string_view figure);
// Estimated cycles = instructions + kL1MissCycles * L1 misses + kLLMissCycles * LL misses: the
// cycle estimation KCachegrind shows, without branch simulation.
inline constexpr int kL1MissCycles = 10;
inline constexpr int kLLMissCycles = 100;

// A host (wall-time) figure that waiting for a core lengthens: judged on quiet repetitions
// only. Bytes, counts and the noise figures themselves are not.
bool contention_sensitive(const MetricDef& def);
// The CPU-time figure of the same span as a wall-time figure ("" when it has none): when noise
// leaves the wall-time row undecided, this row can decide.
std::string cpu_counterpart(std::string_view host_metric);

// The sim clock's rows that count the work of a host or cpu figure's span, for settling that
// figure when noise left it undecided: its phase's span_<phase>_total_sim_instructions - both
// phases' for the figures of the L2 path (waits and swap bandwidth: the loads and writes the sim
// clock counts run in both), and for goodput, which takes both. None for a figure of no span's
// work (noise, device conditions, memory, the sim clock's own) or on another clock.
std::vector<std::string> sim_span_rows(std::string_view metric_key);

// The glossary as Markdown: one table row per metric (docs/metrics.md is this text).
std::string metric_glossary_markdown();

}  // namespace kvbench
