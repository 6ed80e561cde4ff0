#include "case_plan.h"

#include <fmt/format.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <charconv>
#include <numeric>
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

Shard parse_shard(const std::string& text) {
  Shard shard;
  const auto slash = text.find('/');
  const auto number = [&](std::string_view part, int& out) {
    const auto [end, error] = std::from_chars(part.data(), part.data() + part.size(), out);
    return !part.empty() && error == std::errc() && end == part.data() + part.size();
  };
  const std::string_view whole(text);
  if (slash == std::string::npos || !number(whole.substr(0, slash), shard.index) || !number(whole.substr(slash + 1), shard.count)) {
    throw kv::InputError("--shard", text, "not INDEX/COUNT (1/4 is the first of four shards)");
  }
  if (shard.count < 1 || shard.count > 1000) throw kv::InputError("--shard", text, "COUNT must be 1 to 1000");
  if (shard.index < 1 || shard.index > shard.count) {
    throw kv::InputError("--shard", text, fmt::format("INDEX must be 1 to {} (shards count from 1)", shard.count));
  }
  return shard;
}

std::vector<int> assign_shards(const std::vector<double>& group_weights, int count) {
  std::vector<std::size_t> order(group_weights.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return group_weights[a] > group_weights[b]; });
  std::vector<double> load(static_cast<std::size_t>(std::max(count, 1)), 0.0);
  std::vector<int> shard_of(group_weights.size(), 0);
  for (std::size_t g : order) {
    const auto lightest = static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    shard_of[g] = static_cast<int>(lightest);
    load[lightest] += group_weights[g];
  }
  return shard_of;
}

std::string shard_plan_hash(const std::vector<PlannedCase>& cases, const std::vector<std::pair<std::size_t, std::size_t>>& groups,
                            const std::vector<int>& shard_of_group, int count) {
  std::string text = fmt::format("shards {}\n", count);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    for (std::size_t i = groups[g].first; i < groups[g].second; ++i) text += fmt::format("{} {}\n", shard_of_group[g], cases[i].info.name());
  }
  return fmt::format("{:016x}", XXH3_64bits(text.data(), text.size()));
}

}  // namespace kvbench
