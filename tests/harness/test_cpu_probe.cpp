// The core-speed probe: a fixed job (the same checksum on every run, every pass counted) whose
// mean CPU time per thread is a positive, finite figure on any number of threads.
#include <catch2/catch.hpp>

#include <cmath>

#include "cpu_probe.h"

using namespace kvbench;

TEST_CASE("the probe's job is fixed: the same passes give the same checksum", "[cpu-probe]") {
  std::vector<std::uint64_t> a = cpu_probe_buffer(), b = cpu_probe_buffer();
  REQUIRE(a == b);
  REQUIRE(a.size() >= 4096);
  const std::uint64_t one = cpu_probe_job(a, 3);
  CHECK(cpu_probe_job(b, 3) == one);
  CHECK(a == b);
  // Every pass changes the state: a job with a pass fewer or more ends elsewhere.
  std::vector<std::uint64_t> c = cpu_probe_buffer(), d = cpu_probe_buffer();
  CHECK(cpu_probe_job(c, 2) != one);
  CHECK(cpu_probe_job(d, 4) != one);
}

TEST_CASE("the probe reports one job's mean CPU time on one or more threads", "[cpu-probe]") {
  for (int threads : {0, 1, 3}) {
    const double ms = cpu_probe_ms(threads);
    INFO("threads " << threads << ": " << ms << " ms");
    CHECK(std::isfinite(ms));
    CHECK(ms > 0.0);
  }
}
