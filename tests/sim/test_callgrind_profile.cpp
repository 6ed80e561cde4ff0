#include <catch2/catch.hpp>

#include <sstream>

#include "callgrind_profile.h"
#include "runtime/error.h"

using kvbench::sim::CallgrindProfile;
using kvbench::sim::parse_callgrind;

namespace {

CallgrindProfile parse(const std::string& text) {
  std::istringstream in(text);
  return parse_callgrind(in, "test.out");
}

// What callgrind 3.19 writes with --compress-strings=no --compress-pos=no and the cache
// simulation on: a caller whose collection was off (only its calls carry costs), a region with
// its own lines and calls, a callee, trailing zero events left out.
const char* const kDump = R"(# callgrind format
version: 1
creator: callgrind-3.19.0
pid: 5200
cmd:  ./t
part: 1

desc: I1 cache: 32768 B, 64 B, 8-way associative
desc: D1 cache: 32768 B, 64 B, 8-way associative
desc: LL cache: 8388608 B, 64 B, 16-way associative

positions: line
events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw
summary: 6040 1004 1002 2 1 0 2

ob=/tmp/t
fl=???
fn=main
cfn=kvbench_sim_decode_attend
calls=1 0
0 6011 1002 1001 2 0 0 2
cfn=kvbench_sim_decode_append
calls=1 0
0 29 2 1 0 1

fn=kvbench_sim_decode_attend
0 12
cfn=work(void*)
calls=3 0
0 5993 1002 1001 2 0 0 2
0 6

fn=(below main)
cfn=main
calls=1 0
0 6040 1004 1002 2 1 0 2

fn=kvbench_sim_decode_append
0 29 2 1 0 1

fn=work(void*)
0 5993 1002 1001 2 0 0 2
)";

}  // namespace

TEST_CASE("A callgrind dump reads back as each function's inclusive cost per event", "[sim]") {
  const CallgrindProfile p = parse(kDump);
  REQUIRE(p.events == std::vector<std::string>{"Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw"});
  CHECK(p.totals == std::vector<std::uint64_t>{6040, 1004, 1002, 2, 1, 0, 2, 0, 0});
  // Its own lines (12 + 6) and its calls (5993): the call line's cost is inclusive.
  CHECK(p.function("kvbench_sim_decode_attend") == std::vector<std::uint64_t>{6011, 1002, 1001, 2, 0, 0, 2, 0, 0});
  CHECK(p.function("kvbench_sim_decode_append") == std::vector<std::uint64_t>{29, 2, 1, 0, 1, 0, 0, 0, 0});
  CHECK(p.event(p.function("(below main)"), "Ir") == 6040);  // a name in parentheses is a name, not an id
  CHECK(p.event(p.function("main"), "D1mr") == 1);
  CHECK(p.event(p.function("never ran"), "Ir") == 0);
  CHECK(p.event(p.totals, "Bc") == 0);  // an event the dump did not record
  CHECK(p.descriptions.at("LL cache") == "8388608 B, 64 B, 16-way associative");
}

TEST_CASE("Compressed names and positions read as written out", "[sim]") {
  const CallgrindProfile p = parse(
      "events: Ir\n"
      "positions: instr line\n"
      "fn=(1) region\n"
      "0x10 3 5\n"
      "+2 * 7\n"
      "cfn=(2) callee\n"
      "calls=2 0x40 9\n"
      "* +1 100\n"
      "fn=(2)\n"
      "-4 -1 100\n"
      "fn=(1)\n"
      "+1 +1 1\n");
  CHECK(p.function("region") == std::vector<std::uint64_t>{113});
  CHECK(p.function("callee") == std::vector<std::uint64_t>{100});
  CHECK(p.totals == std::vector<std::uint64_t>{113});  // no summary: the sum of the functions' own lines
}

TEST_CASE("Text that is not a callgrind dump is refused with the line and the reason", "[sim]") {
  const auto refused = [](const std::string& text, const std::string& field, const std::string& reason) {
    CAPTURE(text);
    try {
      parse(text);
      FAIL("accepted");
    } catch (const kv::InputError& e) {
      CHECK(e.where() == "test.out");
      CHECK(e.field() == field);
      CHECK(e.reason().find(reason) != std::string::npos);
    }
  };
  refused("", "line 0", "no `events:` line");
  refused("events: Ir\n0 5\n", "line 2", "outside a function");
  refused("events: Ir\nfn=f\n0 5 6\n", "line 3", "more costs than events");
  refused("events: Ir\nfn=f\n0 x\n", "line 3", "'x' is not a count");
  refused("events: Ir\nfn=f\ncalls=1 0\nfn=g\n", "line 4", "where a call's cost line belongs");
  refused("events: Ir\nfn=(7)\n", "line 2", "used before it was defined");
  refused("events: Ir\nnonsense\n", "line 2", "not a callgrind profile line");
}
