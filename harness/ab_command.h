// `kvbench ab`: two kvbench binaries (or one with two suites) compared on a noisy runner. For
// each case and repetition the two run alternately (A B, B A, ...), each as its own child
// `run --repetitions 1` into a private database; the repetitions are merged into two runs of
// --db tagged ab:baseline and ab:candidate (both binaries' versions in the metadata) and
// compared within each pair (a paired test), so load that rises and falls across the night
// cancels. Exit codes are the gate's: 1 regressed, 5 unreliable, 4 inconclusive (when asked).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "store_location.h"

namespace kvbench {

struct AbOptions {
  std::string baseline_bin, candidate_bin, suite, candidate_suite, rules;
  std::string db = kDefaultResultsDb;
  int repetitions = 5;
  bool sim = false;  // each child a sim run (kvbench run --sim): the sides' counted work compared
  std::string unreliable = "fail";    // pass | fail, as for the gate
  std::string inconclusive = "pass";  // pass | fail
  CLI::App* command = nullptr;
};

void add_ab_command(CLI::App& app, AbOptions& options);
int run_ab(const AbOptions& options);

}  // namespace kvbench
