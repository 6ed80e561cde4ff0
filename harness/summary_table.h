// The run summary that `kvbench run` prints and `kvbench show` reprints: medians in human units
// (three significant digits, no exponent), columns from the metric table, case names shortened
// to the parts that differ (the common ones in a key), fitting `width` columns (names
// wrap onto their own line when the figures need the room), and a legend for every mark, the
// clocks, degraded, failed, skipped and interrupted cases in plain words.
#pragma once

#include <string>
#include <vector>

#include "run_view.h"

namespace kvbench {

struct SummaryColumn {
  std::string metric;
  std::string head, sub;  // two header lines
  enum class Style { Unit, Percent, Times } style = Style::Unit;
};

// ttft of the first request and the follow-ups' median, prefill tok/s, tpot p50 and p99, decode tok/s, KV bytes/token, compression, peak L1,
// token drop, recall, attn_rel_error, ppl delta, noise share.
const std::vector<SummaryColumn>& default_summary_columns();
// A sim run's: the prefill and decode phases' counted instructions, L1 and LL misses and
// cycles in place of the host timings, then the same exact figures.
const std::vector<SummaryColumn>& sim_summary_columns();
// The columns a run shows unless told: a sim run's or the default.
const std::vector<SummaryColumn>& run_summary_columns(const RunView& run);
// --metrics a,b,c: names of the metric table ("all": every one); throws kv::InputError naming
// an unknown one.
std::vector<SummaryColumn> summary_columns(const std::string& list);

// One cell: the figure in its column's style, "*" when extrapolated, "~" on the noise share
// when noisy; "-" when it does not apply.
std::string summary_cell(const SummaryColumn& column, const CaseFigure& figure);

std::string render_summary(const RunView& run, const std::vector<SummaryColumn>& columns, int width = 120);
// The same medians as JSON: {run: {...}, cases: [{name, status, note, repetitions, degraded,
// metrics: {name: {median, na_reason, unit, clock, extrapolated, noisy}}}]}.
std::string summary_json(const RunView& run, const std::vector<SummaryColumn>& columns);

}  // namespace kvbench
