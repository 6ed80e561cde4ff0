#include "sparse/visual_budget.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "runtime/error.h"

namespace kv {

int visual_pages_kept(const VisualBudget& visual, int pages) {
  // The budget is a float read from a decimal: 0.1f * 10 is a hair above 1, and means 1.
  if (pages <= 0) return 0;
  const int kept = static_cast<int>(std::ceil(static_cast<double>(visual.budget) * pages - 1e-4));
  return std::clamp(kept, 1, pages);
}

void validate_visual_budget(const VisualBudget& visual, std::string_view where_view) {
  const std::string where(where_view);
  if (!(visual.budget > 0.0f && visual.budget <= 1.0f)) throw InputError(where, "visual.budget", "must be in (0, 1]");
  if (visual.min_pages_per_image < 1) throw InputError(where, "visual.min_pages_per_image", "must be >= 1");
}

void check_visual_budget(const VisualBudget& visual, const std::vector<ImagePages>& images, std::string_view where_view) {
  const std::string where(where_view);
  for (std::size_t i = 0; i < images.size(); ++i) {
    const int pages = images[i].count();
    const std::string image = "image " + std::to_string(i + 1) + " has " + std::to_string(pages) + " pages";
    if (pages < visual.min_pages_per_image) {
      throw InputError(where, "visual.min_pages_per_image",
                       std::to_string(visual.min_pages_per_image) + " is more than an image holds (" + image + ")");
    }
    const int kept = visual_pages_kept(visual, pages);
    if (kept < visual.min_pages_per_image) {
      std::ostringstream budget;
      budget << visual.budget;
      throw InputError(where, "visual.budget",
                       budget.str() + " keeps " + std::to_string(kept) + " page(s) of an image, below min_pages_per_image " +
                           std::to_string(visual.min_pages_per_image) + " (" + image + ")");
    }
  }
}

}  // namespace kv
