#include <catch2/catch.hpp>

#include <random>

#include "human_units.h"

using namespace kvbench;

TEST_CASE("three significant digits, never exponent notation", "[units]") {
  CHECK(significant(0.0990123) == "0.0990");
  CHECK(significant(24.4999) == "24.5");
  CHECK(significant(9.996) == "10.0");
  CHECK(significant(85612.0) == "85600");
  CHECK(significant(0.0) == "0");
  CHECK(significant(-1.234) == "-1.23");
  CHECK(significant(3e-7) == "<0.00001");
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> exponent(-5.0, 9.0);  // up to 1e9 ms (11.6 days), 1 GB
  for (int i = 0; i < 2000; ++i) {
    const double v = std::pow(10.0, exponent(rng));
    for (const std::string& s : {significant(v), human_duration_ms(v), human_bytes(v), human_rate(v)}) {
      INFO(v << " -> " << s);
      CHECK(s.find_first_of("eE") == std::string::npos);
      CHECK(s.size() <= 10);
    }
  }
}

TEST_CASE("durations, bytes and rates take the unit that keeps three digits", "[units]") {
  CHECK(human_duration_ms(0.85) == "850 us");
  CHECK(human_duration_ms(24.49) == "24.5 ms");
  CHECK(human_duration_ms(999.7) == "1.00 s");
  CHECK(human_duration_ms(856000.0) == "14.3 min");
  CHECK(human_duration_ms(7.56e6) == "2.10 h");
  CHECK(human_bytes(512) == "512 B");
  CHECK(human_bytes(133400) == "130 KiB");
  CHECK(human_bytes(1023 * 1024.0) == "0.999 MiB");
  CHECK(human_bytes(768.0 * 1048576) == "768 MiB");
  CHECK(human_bytes(1.5 * 1073741824) == "1.50 GiB");
  CHECK(human_rate(15.47) == "15.5");
  CHECK(human_rate(12345) == "12.3k");
  CHECK(human_rate(999.9) == "1.00k");
  CHECK(human_value(1.234, "%") == "+1.23%");
  CHECK(human_value(-0.5, "%") == "-0.500%");
  CHECK(human_value(12, "count") == "12");
  CHECK(human_value(2048, "bytes") == "2.00 KiB");
  CHECK(human_value(0.8999999761581421, "ratio") == "0.900");
}
