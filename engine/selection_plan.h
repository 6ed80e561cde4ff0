// What page selection decides, as plain values: the plan one attention call applies and the
// record of a step's selection that prefetch prediction reads. Selection (sparse/) writes
// them; the cache and the memory pool (memory/) read them. This header sits below both, so
// that sparse/ depends on the cache and never the other way round.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kv {

// Why a page was kept: it holds a sink token, it overlaps the local window, its score won the
// text budget, or it won its image's own budget (sparse/visual_budget.h).
enum class KeepReason : std::uint8_t { Sink, Window, Score, Visual };

// An image's logical pages [first, last): an image starts on a fresh page, its last page may
// be partial (the selection's view) or be left out (the cache's read-only pages: whole pages).
struct ImagePages {
  int first = 0;
  int last = 0;

  int count() const { return last - first; }
};

struct HeadSelection {
  std::vector<int> pages;            // kept logical pages, ascending
  std::vector<KeepReason> reasons;   // one per kept page
  std::vector<float> middle_scores;  // the score of every middle (non-forced) page, page order
};

struct SelectionPlan {
  int total_pages = 0;
  int budget_pages = 0;         // the text budget, after the forced pages were fitted
  int visual_budget_pages = 0;  // the images' budgets together, a head
  std::vector<HeadSelection> heads;
  // One flag a page, set for image pages selected by their image's budget; empty: none. Such
  // pages are neither forced nor middle pages (middle_scores leaves them out).
  std::vector<std::uint8_t> visual;

  std::size_t kept_pages(int head) const { return heads[static_cast<std::size_t>(head)].pages.size(); }
  bool is_visual(int page) const { return !visual.empty() && visual[static_cast<std::size_t>(page)] != 0; }
};

// One kv head's selection at one step (logical page indices, ascending) and the scores of its
// middle pages (the pages the budget competes for), as sparse/selection.h plans them.
struct SelectionRecord {
  std::vector<int> kept;
  std::vector<int> middle_pages;
  std::vector<float> middle_scores;
};

}  // namespace kv
