// The commit plan of a verify step: pure arithmetic over the layers' lengths.
#include <catch2/catch.hpp>

#include <vector>

#include "runtime/error.h"
#include "speculative/commit_plan.h"

using namespace kv;

namespace {

bool refused(const std::vector<int>& lengths, int committed, int keep, const std::string& field) {
  try {
    plan_commit(3, committed, lengths, keep, "test");
  } catch (const InputError& e) {
    return e.where() == "test" && e.field() == field;
  }
  return false;
}

}  // namespace

TEST_CASE("a commit plan keeps the accepted prefix of the tentative tokens and releases the rest", "[speculative]") {
  const std::vector<int> lengths = {105, 105, 105};
  const CommitPlan plan = plan_commit(3, 100, lengths, 2, "test");
  CHECK(plan.seq == 3);
  CHECK(plan.tentative == 5);
  CHECK(plan.new_length() == 102);
  CHECK(plan.released() == 3);
  CHECK(plan_commit(3, 100, lengths, 0, "test").new_length() == 100);  // a rollback
  CHECK(plan_commit(3, 100, lengths, 5, "test").released() == 0);      // accept all
}

TEST_CASE("a commit plan refuses an unfinished forward pass, a cut sequence and a keep out of range", "[speculative]") {
  CHECK(refused({105, 104, 105}, 100, 1, "seq"));  // layer 1 has not appended its token yet
  CHECK(refused({99, 99}, 100, 0, "seq"));
  CHECK(refused({105, 105}, 100, 6, "keep"));
  CHECK(refused({105, 105}, 100, -1, "keep"));
  CHECK(refused({}, 0, 0, "seq"));
}
