// The cost model against measurement, per complete measured case of a run (soc "host": this
// machine, or the board of a device run, priced with its SoC's profile): measured (median of the
// quiet repetitions) and modelled attention compute, tpot p50, ttft and L2 wait. On the synthetic
// backend the measured timings leave out the model's dense layers (the generator stands in for
// them), so the modelled tpot and ttft are given with the modelled dense time taken out.
// `kvbench validate-model` prints them; the report sets device runs beside the SoCs it prices.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "results_reader.h"
#include "results_store.h"

namespace kvbench {

struct ValidationRow {
  std::string case_name, metric, note;
  std::optional<double> measured, modelled;
  std::optional<double> ratio() const {
    if (!measured || !modelled || !(*measured > 0.0)) return std::nullopt;
    return *modelled / *measured;
  }
};

std::vector<ValidationRow> validation_rows(ResultsStore& store, const RunRecord& run);

// What measured a run: its board, else its CPU ("" where the metadata names neither).
std::string measuring_machine(const RunRecord& run);

// Within this band of 1 the model counts as validated for that figure (docs/cost-model.md).
double validation_tolerance(const std::string& metric);

}  // namespace kvbench
