#include "report_sections.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace kvbench::report {

using json = nlohmann::json;

void metadata_section(Page& page, const ReportModel& m) {
  const RunRecord& run = m.record;
  page << section_open("metadata", "Run metadata");
  const json meta = json::parse(run.meta_json, nullptr, false);
  const auto field = [&](const char* key) {
    if (meta.is_discarded() || !meta.contains(key)) return std::string("-");
    return meta[key].is_string() ? meta[key].get<std::string>() : meta[key].dump();
  };
  page << "<table class=\"meta\">\n<tbody>\n";
  const std::vector<std::pair<std::string, std::string>> rows = {
      {"run", std::to_string(run.id) + " (" + run.status + ")"},
      {"suite", run.suite},
      {"started", run.started_at + " to " + (run.ended_at.empty() ? "-" : run.ended_at)},
      {"git sha", run.git_sha + (run.git_dirty ? " (dirty)" : "")},
      {"compiler", field("compiler")},
      {"build", field("build_type")},
      {"CPU", field("cpu_model") + ", " + field("cores") + " cores"},
      {"board", field("board")},
      {"kernel path", field("kernel_path")},
      {"measured cases priced as", meta.contains("device_soc") ? field("device_soc") + " (a device run: kvbench run --soc)"
                                                                 : std::string("host (this machine's calibration)")},
      {"config hash", run.config_hash},
      {"tags", [&] {
         std::string t;
         for (const std::string& tag : run.tags) t += (t.empty() ? "" : ", ") + tag;
         return t.empty() ? std::string("-") : t;
       }()},
  };
  for (const auto& [k, v] : rows) page << "<tr><th>" + h(k) + "</th><td>" + h(v) + "</td></tr>\n";
  page << "</tbody>\n</table>\n";
  const json config = json::parse(run.config_json, nullptr, false);
  page << "<details><summary>resolved configuration</summary>\n<pre>" + h(config.is_discarded() ? run.config_json : config.dump(2)) +
              "</pre>\n</details>\n";
  page << "<details><summary>machine and run metadata</summary>\n<pre>" + h(meta.is_discarded() ? run.meta_json : meta.dump(2)) +
              "</pre>\n</details>\n";
  page << "</section>\n";
}

}  // namespace kvbench::report
