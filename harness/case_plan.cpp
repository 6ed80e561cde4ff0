#include "case_plan.h"

#include <algorithm>
#include <optional>
#include <regex>

#include "runtime/error.h"

namespace kvbench {

std::vector<PlannedCase> plan_cases(const SuiteConfig& suite, const std::string& filter) {
  std::optional<std::regex> pattern;
  if (!filter.empty()) {
    try {
      pattern.emplace(filter, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      throw kv::InputError("--filter", filter, std::string("not a regular expression: ") + e.what());
    }
  }
  std::vector<PlannedCase> cases;
  for (std::size_t m = 0; m < suite.models.size(); ++m) {
    const auto runs_on = [&](const std::vector<std::string>& only) {
      return only.empty() || std::find(only.begin(), only.end(), suite.models[m].name) != only.end();
    };
    for (std::size_t w = 0; w < suite.workloads.size(); ++w) {
      for (std::size_t p = 0; p < suite.policies.size(); ++p) {
        if (!runs_on(suite.workloads[w].models) || !runs_on(suite.policies[p].models)) continue;
        for (const std::string& soc : suite.socs) {
          PlannedCase c;
          c.info = CaseInfo{suite.models[m].name, suite.workloads[w].name, suite.policies[p].name, soc, ""};
          if (pattern && !std::regex_search(c.info.name(), *pattern)) continue;
          c.model_index = m;
          c.workload_index = w;
          c.policy_index = p;
          cases.push_back(std::move(c));
        }
      }
    }
  }
  if (cases.empty()) throw kv::InputError("--filter", filter, "matches no case of suite '" + suite.name + "'");
  return cases;
}

std::vector<std::pair<std::size_t, std::size_t>> engine_run_groups(const std::vector<PlannedCase>& cases) {
  std::vector<std::pair<std::size_t, std::size_t>> groups;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const bool same = i > 0 && cases[i].model_index == cases[i - 1].model_index &&
                      cases[i].workload_index == cases[i - 1].workload_index && cases[i].policy_index == cases[i - 1].policy_index;
    if (same) {
      groups.back().second = i + 1;
    } else {
      groups.emplace_back(i, i + 1);
    }
  }
  return groups;
}

}  // namespace kvbench
