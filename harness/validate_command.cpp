#include "validate_command.h"


#include <fmt/format.h>

#include <cmath>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "cli_checks.h"
#include "human_units.h"
#include "metric_table.h"
#include "results_reader.h"
#include "model_validation.h"
#include "runtime/error.h"

namespace kvbench {

using json = nlohmann::json;

void add_validate_command(CLI::App& app, ValidateOptions& o) {
  o.command = app.add_subcommand("validate-model", "The cost model against measurement: a run's host cases, measured and modelled side by side");
  o.command->add_option("--run", o.run, kRunSelectorHelp)->capture_default_str();
  add_db_option(o.command, "--db", o.db, "results database")->capture_default_str();
  o.command->add_flag("--json", o.json, "print a list of {case, metric, measured, modelled, ratio}");
}

int run_validate(const ValidateOptions& o, std::FILE* out) {
  ResultsStore store(o.db, Access::ReadOnly);
  const std::int64_t run_id = resolve_run(store, o.run, "--run");
  const RunRecord run = get_run(store, run_id, "--run");
  const std::vector<ValidationRow> rows = validation_rows(store, run);
  if (o.json) {
    json list = json::array();
    for (const ValidationRow& r : rows) {
      const auto ratio = r.ratio();
      list.push_back({{"case", r.case_name},
                      {"metric", r.metric},
                      {"measured", r.measured ? json(*r.measured) : json(nullptr)},
                      {"modelled", r.modelled ? json(*r.modelled) : json(nullptr)},
                      {"ratio", ratio ? json(*ratio) : json(nullptr)},
                      {"note", r.note}});
    }
    fmt::print(out, "{}\n", list.dump(2));
    return kExitOk;
  }
  // A device run (kvbench run --soc) priced its measured cases with that SoC's profile.
  const std::string device = run_meta_text(run, "device_soc"), machine = measuring_machine(run);
  fmt::print(out, "run {} ({}): measured on {} (median of quiet repetitions) vs modelled with the {} profile; ratio: modelled / measured\n\n",
             run.id, run.suite, machine.empty() ? std::string("the host clock") : machine, device.empty() ? std::string("host") : device);
  // The header mirrors the rows: a case on its own line, its metrics indented under it.
  fmt::print(out, "case\n  {:<28} {:>11} {:>11} {:>7}\n", "metric", "measured", "modelled", "ratio");
  std::string last_case;
  std::map<std::string, std::pair<int, int>> within;  // metric -> (in band, with a ratio)
  for (const ValidationRow& r : rows) {
    if (r.case_name != last_case) {
      fmt::print(out, "{}\n", r.case_name);
      last_case = r.case_name;
    }
    const auto ratio = r.ratio();
    std::string mark;
    if (ratio) {
      const bool in = std::fabs(*ratio - 1.0) <= validation_tolerance(r.metric);
      auto& [good, all] = within[r.metric];
      good += in ? 1 : 0;
      ++all;
      mark = in ? "" : " (outside +-" + fmt::format("{:.0f}%", validation_tolerance(r.metric) * 100.0) + ")";
    }
    fmt::print(out, "  {:<28} {:>11} {:>11} {:>7}{}{}\n", r.metric, r.measured ? human_value(*r.measured, "ms") : "-",
               r.modelled ? human_value(*r.modelled, "ms") : "-", ratio ? fmt::format("{:.2f}", *ratio) : "-", mark,
               r.note.empty() ? "" : "  " + r.note);
  }
  fmt::print(out, "\n{:<30} within band\n", "metric");
  for (const auto& [metric, counts] : within) {
    fmt::print(out, "{:<30} {} of {} (+-{:.0f}%)\n", metric, counts.first, counts.second, validation_tolerance(metric) * 100.0);
  }
  return kExitOk;
}

}  // namespace kvbench
