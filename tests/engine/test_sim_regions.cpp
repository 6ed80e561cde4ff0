#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "sim_regions.h"

using namespace kv;

TEST_CASE("Each phase and work part has a counted region of its own, named for callgrind's pattern", "[sim]") {
  std::set<std::string> symbols;
  for (Phase phase : {Phase::Prefill, Phase::Decode}) {
    for (sim::WorkPart part : {sim::WorkPart::Append, sim::WorkPart::Attend, sim::WorkPart::Model}) {
      const std::string symbol(sim::region_symbol(phase, part));
      CAPTURE(symbol);
      CHECK(symbol == "kvbench_sim_" + std::string(phase_name(phase)) + "_" + std::string(sim::work_part_name(part)));
      CHECK(symbol.rfind("kvbench_sim_", 0) == 0);  // sim::kRegionPattern
      symbols.insert(symbol);
    }
  }
  CHECK(symbols.size() == sim::kRegionCount);
}

TEST_CASE("A counted region runs its work once, in order, one region after another", "[sim]") {
  std::string ran;
  sim::counted(Phase::Decode, sim::WorkPart::Attend, [&] { ran += "a"; });
  sim::counted(Phase::Prefill, sim::WorkPart::Append, [&] { ran += "b"; });
  CHECK(ran == "ab");
  // Leaving by an exception leaves the region: the next one may start.
  CHECK_THROWS(sim::counted(Phase::Decode, sim::WorkPart::Model, [] { throw std::runtime_error("x"); }));
  sim::counted(Phase::Decode, sim::WorkPart::Model, [&] { ran += "c"; });
  CHECK(ran == "abc");
  CHECK(sim::client_requests_built());  // the build has valgrind's headers (ci/install-deps.sh)
  sim::discard_counts();                // outside callgrind: nothing
}
