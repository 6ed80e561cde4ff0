#include <catch2/catch.hpp>

#include "quant/format.h"
#include "runtime/error.h"

using namespace kv;

TEST_CASE("Format tokens round-trip", "[quant]") {
  for (Format f : kAllFormats) CHECK(parse_format(format_name(f), "test", "k") == f);
  CHECK(format_name(Format::Q4) == "q4");
  CHECK(format_bits(Format::Q2) == 2);
  CHECK(format_bits(Format::FP8) == 8);
  CHECK(format_max_code(Format::Q4) == 15);
  CHECK(format_max_code(Format::F16) == 0);
  CHECK(is_integer_format(Format::Q8));
  CHECK_FALSE(is_integer_format(Format::FP8));
}

TEST_CASE("An unknown format token names the file and field", "[quant]") {
  CHECK_THROWS_WITH(parse_format("int3", "suite.json", "policies[0].k"),
                    Catch::Contains("suite.json") && Catch::Contains("policies[0].k") && Catch::Contains("int3"));
}
