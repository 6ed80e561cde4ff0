// Runs benchmarks through Google Benchmark's own runner (benchmark::RunSpecifiedBenchmarks) with a
// reporter that keeps what they report, for `kvbench calibrate`: each benchmark repeated, every
// figure the median over the repetitions.
#pragma once

#include <benchmark/benchmark.h>

#include <functional>
#include <map>
#include <string>
#include <utility>

namespace kvbench::micro {

struct BenchmarkFigures {
  double seconds_per_iteration = 0.0;        // real time
  std::map<std::string, double> counters;    // bytes_per_second and the benchmark's own
  std::string label;
  double counter(const std::string& name) const;  // throws std::out_of_range naming it
};

class BenchmarkSession {
 public:
  // Each benchmark runs `repetitions` times for at least min_seconds each.
  explicit BenchmarkSession(double min_seconds, int repetitions = 3) : min_seconds_(min_seconds), repetitions_(repetitions) {}

  // Registers body(state, args...) under `name` for the next run().
  template <typename Body, typename... Args>
  void add(const std::string& name, Body&& body, Args&&... args) {
    benchmark::RegisterBenchmark(name.c_str(), std::forward<Body>(body), std::forward<Args>(args)...)
        ->UseRealTime()
        ->MinTime(min_seconds_)
        ->Repetitions(repetitions_);
  }

  // Runs what was added since the last run and forgets it. Throws kv::InputError naming the
  // benchmark when one stopped with an error (a directory it could not use).
  std::map<std::string, BenchmarkFigures> run();

 private:
  double min_seconds_;
  int repetitions_;
};

}  // namespace kvbench::micro
