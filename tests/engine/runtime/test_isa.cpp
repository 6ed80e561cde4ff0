#include <catch2/catch.hpp>

#include "runtime/error.h"
#include "runtime/isa.h"

using namespace kv;

TEST_CASE("ISA names parse back to themselves", "[runtime]") {
  for (Isa isa : {Isa::Auto, Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Neon}) {
    CHECK(parse_isa(isa_name(isa), "test") == isa);
  }
  CHECK_THROWS_WITH(parse_isa("sse9", "kvbench-micro --isa"), Catch::Contains("kvbench-micro --isa") &&
                                                                   Catch::Contains("unknown ISA 'sse9'"));
}

TEST_CASE("Scalar is always supported and auto resolves to the best path", "[runtime]") {
  const auto isas = supported_isas();
  REQUIRE(!isas.empty());
  CHECK(isas.front() == Isa::Scalar);
  CHECK(resolve_isa(Isa::Auto) == best_isa());
  CHECK(best_isa() == isas.back());
  for (Isa isa : isas) CHECK(resolve_isa(isa) == isa);
}

TEST_CASE("An explicit path the CPU lacks is refused", "[runtime]") {
  for (Isa isa : {Isa::Avx2, Isa::Avx512, Isa::Neon}) {
    if (!isa_supported(isa)) CHECK_THROWS_AS(resolve_isa(isa), InputError);
  }
#if defined(__x86_64__)
  CHECK_FALSE(isa_supported(Isa::Neon));
#endif
}
