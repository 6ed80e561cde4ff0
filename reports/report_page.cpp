#include "report_page.h"

#include <cctype>

namespace kvbench::report {

std::string section_open(const std::string& id, const std::string& title) {
  return "<section id=\"" + id + "\">\n<h2>" + h(title) + "</h2>\n";
}

std::string case_anchor(const std::string& name) {
  std::string id = "case-";
  for (char ch : name) id += std::isalnum(static_cast<unsigned char>(ch)) != 0 ? ch : '-';
  return id;
}

std::string case_label(const CaseView& c, bool with_soc) { return c.workload + "/" + c.policy + (with_soc ? "/" + c.soc : ""); }

std::optional<double> figure(const CaseView& c, const std::string& name) {
  const auto f = c.figures.find(name);
  if (f == c.figures.end()) return std::nullopt;
  return f->second.median;
}

}  // namespace kvbench::report
