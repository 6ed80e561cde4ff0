#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "runtime/error.h"
#include "sparse/policy.h"
#include "sparse/visual_budget.h"

using namespace kv;

namespace {

// The field an InputError names, or "" when `f` does not throw one.
template <typename F>
std::string refused_field(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.field();
  }
  return "";
}

}  // namespace

TEST_CASE("An image keeps ceil(budget * pages) of its pages, at least one and at most all", "[sparse]") {
  CHECK(visual_pages_kept({0.1f, 1}, 9) == 1);
  CHECK(visual_pages_kept({0.1f, 1}, 10) == 1);
  CHECK(visual_pages_kept({0.1f, 1}, 11) == 2);
  CHECK(visual_pages_kept({0.2f, 1}, 10) == 2);
  CHECK(visual_pages_kept({1.0f, 1}, 9) == 9);
  CHECK(visual_pages_kept({0.01f, 1}, 3) == 1);
  CHECK(visual_pages_kept({0.5f, 1}, 0) == 0);
}

TEST_CASE("An impossible visual block is refused with its field named", "[sparse]") {
  for (float budget : {-0.1f, 1.5f}) {
    CHECK(refused_field([&] { validate_visual_budget({budget, 1}, "suite.json"); }) == "visual.budget");
  }
  CHECK(refused_field([] { validate_visual_budget({0.1f, 0}, "suite.json"); }) == "visual.min_pages_per_image");
  CHECK(refused_field([] { validate_visual_budget({0.1f, 1}, "suite.json"); }).empty());
  // Through the sparse policy: checked there, and a full selector has nothing to budget.
  SparsePolicy p;
  p.selector = Selector::Quest;
  p.budget = 0.1f;
  p.visual = {2.0f, 1};
  CHECK(refused_field([&] { validate_sparse_policy(p, "suite.json"); }) == "visual.budget");
  p.visual = {0.1f, 1};
  CHECK(refused_field([&] { validate_sparse_policy(p, "suite.json"); }).empty());
  p.selector = Selector::Full;
  p.budget = 0.0f;
  CHECK(refused_field([&] { validate_sparse_policy(p, "suite.json"); }) == "visual.budget");
}

TEST_CASE("A budget below min_pages_per_image pages of an image is refused, naming the field and the image", "[sparse]") {
  const std::vector<ImagePages> images{{8, 17}, {20, 29}};  // 9 pages each
  CHECK(refused_field([&] { check_visual_budget({0.1f, 1}, images, "case multimodal-2i"); }).empty());
  CHECK(refused_field([&] { check_visual_budget({0.1f, 2}, images, "case multimodal-2i"); }) == "visual.budget");
  CHECK(refused_field([&] { check_visual_budget({0.25f, 3}, images, "case multimodal-2i"); }).empty());
  CHECK(refused_field([&] { check_visual_budget({1.0f, 10}, images, "case multimodal-2i"); }) == "visual.min_pages_per_image");
  try {
    check_visual_budget({0.1f, 2}, images, "case multimodal-2i");
    FAIL("not refused");
  } catch (const InputError& e) {
    const std::string what = e.what();
    CHECK(what.find("case multimodal-2i") != std::string::npos);
    CHECK(what.find("image 1 has 9 pages") != std::string::npos);
  }
}
