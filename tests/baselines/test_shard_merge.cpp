// Whether shard runs make one run (shard_merge.h): one suite, configuration, definition and plan,
// each shard once and complete, no case twice; --allow-partial merges the rest, marked partial.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "runtime/error.h"
#include "shard_merge.h"

using namespace kvbench;

namespace {

std::vector<ShardRunInfo> three_shards() {
  std::vector<ShardRunInfo> shards;
  for (int i = 1; i <= 3; ++i) {
    ShardRunInfo s;
    s.file = "shard" + std::to_string(i) + ".sqlite";
    s.run_id = 1;
    s.suite = "nightly";
    s.config_hash = "c0ffee";
    s.plan = "p1";
    s.run_group = "night-42";
    s.definition = 8;
    s.index = i;
    s.count = 3;
    s.cases = {"m/w" + std::to_string(i) + "/p/host"};
    shards.push_back(s);
  }
  return shards;
}

// The refusal's file and field.
std::pair<std::string, std::string> refusal(const std::vector<ShardRunInfo>& shards, bool allow_partial = false) {
  try {
    plan_merge(shards, allow_partial);
  } catch (const kv::InputError& e) {
    return {e.where(), e.field()};
  }
  return {"", "accepted"};
}

}  // namespace

TEST_CASE("complete shards of one plan merge in shard order", "[shard-merge]") {
  std::vector<ShardRunInfo> shards = three_shards();
  std::swap(shards[0], shards[2]);
  const MergePlan plan = plan_merge(shards, false);
  REQUIRE(plan.shards.size() == 3);
  CHECK(plan.shards[0]->index == 1);
  CHECK(plan.shards[2]->index == 3);
  CHECK_FALSE(plan.partial);
  CHECK(plan.missing.empty());
  CHECK(plan.status == RunStatus::Complete);
}

TEST_CASE("shards of another suite, configuration, definition or plan are refused naming the file and field", "[shard-merge]") {
  auto shards = three_shards();
  shards[1].suite = "smoke";
  CHECK(refusal(shards) == std::make_pair(std::string("shard2.sqlite"), std::string("suite")));
  shards = three_shards();
  shards[2].config_hash = "beef";
  CHECK(refusal(shards) == std::make_pair(std::string("shard3.sqlite"), std::string("config_hash")));
  shards = three_shards();
  shards[2].definition = 7;
  CHECK(refusal(shards).second == "benchmark_definition");
  shards = three_shards();
  shards[1].plan = "p2";
  CHECK(refusal(shards).second == "shard plan");
  shards = three_shards();
  shards[1].repetitions = 10;
  CHECK(refusal(shards).second == "repetitions");
  shards = three_shards();
  shards[2].build = "0123abcd+dirty";
  CHECK(refusal(shards).second == "build");
  shards = three_shards();
  shards[2].kernel_path = "avx2";
  CHECK(refusal(shards).second == "kernel_path");
  shards = three_shards();
  shards[0].profiles = R"({"host": {"hash": "x"}})";
  CHECK(refusal(shards).second == "soc_profiles");
  shards = three_shards();
  shards[1].count = 4;
  CHECK(refusal(shards).second == "shard count");
  // Even --allow-partial does not mix them.
  CHECK(refusal(shards, true).second == "shard count");
}

TEST_CASE("a shard given twice, or a case in two shards, is refused", "[shard-merge]") {
  auto shards = three_shards();
  shards.push_back(shards[1]);
  shards.back().file = "copy.sqlite";
  CHECK(refusal(shards) == std::make_pair(std::string("copy.sqlite"), std::string("shard")));
  CHECK(refusal(shards, true).second == "shard");
  shards = three_shards();
  shards[2].cases.push_back(shards[0].cases.front());
  CHECK(refusal(shards) == std::make_pair(std::string("shard3.sqlite"), std::string("cases")));
}

TEST_CASE("a missing or unfinished shard is refused unless the merge may be partial", "[shard-merge]") {
  auto shards = three_shards();
  shards.erase(shards.begin() + 1);
  CHECK(refusal(shards).second == "shards");
  MergePlan plan = plan_merge(shards, true);
  CHECK(plan.partial);
  CHECK(plan.missing == std::vector<int>{2});
  CHECK(plan.status == RunStatus::Failed);

  shards = three_shards();
  shards[0].status = RunStatus::Interrupted;
  CHECK(refusal(shards) == std::make_pair(std::string("shard1.sqlite"), std::string("status")));
  plan = plan_merge(shards, true);
  CHECK(plan.partial);
  CHECK(plan.status == RunStatus::Interrupted);
  shards[2].status = RunStatus::Aborted;
  CHECK(plan_merge(shards, true).status == RunStatus::Aborted);
  shards[1].status = RunStatus::Failed;
  CHECK(plan_merge(shards, true).status == RunStatus::Failed);

  // A shard still running is never merged.
  shards = three_shards();
  shards[1].status = RunStatus::Running;
  CHECK(refusal(shards, true).second == "status");
  CHECK(refusal({}, true).second == "run group");
}
