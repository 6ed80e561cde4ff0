// The visual pool's selection budget: image pages compete per image, never with text.
//
// An image's pages are selected apart from the text's: each image keeps its own top pages by
// the query bound, `budget` of its pages (ceil), which must come to at least
// `min_pages_per_image`, so that no text budget decides whether an image is seen at all. The
// text budget is still a fraction of all the context's pages (image pages counted, as without
// the block), spent on text pages alone and capped at them.
#pragma once

#include <string_view>
#include <vector>

#include "selection_plan.h"

namespace kv {

struct VisualBudget {
  float budget = 0.0f;          // fraction of each image's pages; 0: no visual block
  int min_pages_per_image = 1;  // the fewest pages the budget may keep of any image

  bool enabled() const { return budget != 0.0f; }
};

// The pages kept of an image of `pages` pages: ceil(budget * pages), within [1, pages].
int visual_pages_kept(const VisualBudget& visual, int pages);

// Throws InputError ("<where>: visual.<field>: <reason>") for an impossible block.
void validate_visual_budget(const VisualBudget& visual, std::string_view where);

// Throws InputError naming visual.budget where an image's share comes to fewer pages than
// min_pages_per_image, or visual.min_pages_per_image where an image has fewer pages than that.
void check_visual_budget(const VisualBudget& visual, const std::vector<ImagePages>& images, std::string_view where);

}  // namespace kv
