#include <catch2/catch.hpp>

#include "runtime/error.h"
#include "sparse/policy.h"

using namespace kv;

TEST_CASE("Selector names round-trip, unknown ones name the file", "[sparse]") {
  for (Selector s : {Selector::Full, Selector::Window, Selector::Quest, Selector::H2O, Selector::Recency, Selector::Hybrid}) {
    CHECK(parse_selector(selector_name(s), "t") == s);
  }
  CHECK_THROWS_WITH(parse_selector("random", "suite.json"), Catch::Contains("suite.json") && Catch::Contains("random"));
}

TEST_CASE("A policy takes exactly one budget, and only when it selects", "[sparse]") {
  SparsePolicy p;
  p.selector = Selector::Hybrid;
  CHECK_THROWS_WITH(validate_sparse_policy(p, "policy"), Catch::Contains("exactly one"));
  p.budget = 0.1f;
  CHECK_NOTHROW(validate_sparse_policy(p, "policy"));
  p.budget_pages = 4;
  CHECK_THROWS_WITH(validate_sparse_policy(p, "policy"), Catch::Contains("exactly one"));
  p.budget_pages = 0;
  p.budget = 1.5f;
  CHECK_THROWS_WITH(validate_sparse_policy(p, "policy"), Catch::Contains("(0, 1]"));
  p.budget = 0.5f;
  p.decay = 0.0f;
  CHECK_THROWS_WITH(validate_sparse_policy(p, "policy"), Catch::Contains("decay"));
  SparsePolicy window;
  window.selector = Selector::Window;
  CHECK_NOTHROW(validate_sparse_policy(window, "policy"));
  window.budget = 0.5f;
  CHECK_THROWS_WITH(validate_sparse_policy(window, "policy"), Catch::Contains("takes no budget"));
  window.budget = 0.0f;
  window.window = 0;
  CHECK_THROWS_WITH(validate_sparse_policy(window, "policy"), Catch::Contains("window"));
}
