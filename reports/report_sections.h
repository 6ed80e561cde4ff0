// The report's sections, in page order, each rendered from the report model alone into the
// page (report_model.h): one file each.
#pragma once

#include "report_model.h"
#include "report_page.h"

namespace kvbench::report {

// The verdict against the baseline: its counts, what changed between the runs, degraded cases.
void verdict_section(Page& page, const ReportModel& m);
// Per case the figures a user reads a run by: both TTFTs, speed, KV size, memory, accuracy.
void headline_section(Page& page, const ReportModel& m);
// The verdict's rows that regressed, improved or were left unreliable, then the inconclusive.
void rows_section(Page& page, const ReportModel& m);
// Headline metrics over the suite's recent runs, with change points and the baseline marked.
void trends_section(Page& page, const ReportModel& m);
// Per case: water levels, swap, time by phase, TPOT, selection, drift and dropped tokens.
void cases_section(Page& page, const ReportModel& m);
// Attention-mass recall of each policy beside the oracle's.
void sparse_section(Page& page, const ReportModel& m);
// Pareto fronts per (model, workload, SoC).
void pareto_section(Page& page, const ReportModel& m);
// The modelled figures of each configuration across the SoCs priced.
void cross_soc_section(Page& page, const ReportModel& m);
// The run's metadata and resolved configuration.
void metadata_section(Page& page, const ReportModel& m);

}  // namespace kvbench::report
