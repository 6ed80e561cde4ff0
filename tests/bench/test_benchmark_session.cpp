// BenchmarkSession (bench/benchmark_session.h): benchmarks run through Google Benchmark's own
// runner, figures captured as medians over repetitions, the registry cleared after each run,
// and a benchmark that stops with an error reported as an input error naming it.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "benchmark_session.h"
#include "runtime/error.h"

using kvbench::micro::BenchmarkSession;

namespace {

void sleeper(benchmark::State& state, int micros) {
  for (auto _ : state) std::this_thread::sleep_for(std::chrono::microseconds(micros));
  state.counters["constant"] = 7.0;
  state.counters["micros"] = micros;
  state.counters["per_call"] = benchmark::Counter(static_cast<double>(state.iterations()) * 3.0, benchmark::Counter::kAvgIterations);
  state.SetLabel("slept");
}

void failing(benchmark::State& state) {
  state.SkipWithError("no such directory: /nowhere");
  for (auto _ : state) {
  }
}

}  // namespace

TEST_CASE("A benchmark session reports each benchmark's median time and counters", "[bench][session]") {
  BenchmarkSession session(0.01);
  session.add("sleep/200us", sleeper, 200);
  session.add("sleep/1000us", sleeper, 1000);
  const auto figures = session.run();
  REQUIRE(figures.size() == 2);
  const auto& shorter = figures.at("sleep/200us");
  const auto& longer = figures.at("sleep/1000us");
  // Each name has its own benchmark's figures (told apart by a counter, not by timing: on a
  // busy machine a 200 us sleep can oversleep a 1 ms one), and a sleep lasts at least what was
  // asked.
  CHECK(shorter.counter("micros") == 200.0);
  CHECK(longer.counter("micros") == 1000.0);
  CHECK(shorter.seconds_per_iteration >= 200e-6);
  CHECK(longer.seconds_per_iteration >= 1000e-6);
  CHECK(shorter.counter("constant") == 7.0);
  CHECK(shorter.counter("per_call") == Approx(3.0));
  CHECK(shorter.label == "slept");
  CHECK_THROWS_AS(shorter.counter("missing"), std::out_of_range);
  // What ran is forgotten: the next run holds only what was added since.
  session.add("sleep/100us", sleeper, 100);
  CHECK(session.run().size() == 1);
}

TEST_CASE("A benchmark that stops with an error is an input error naming it", "[bench][session]") {
  BenchmarkSession session(0.01);
  session.add("l2/broken", failing);
  try {
    session.run();
    FAIL("no error");
  } catch (const kv::InputError& error) {
    CHECK(std::string(error.what()).find("l2/broken") != std::string::npos);
    CHECK(std::string(error.what()).find("/nowhere") != std::string::npos);
  }
  // The registry is cleared after a failed run too.
  session.add("sleep/100us", sleeper, 100);
  CHECK(session.run().size() == 1);
}
