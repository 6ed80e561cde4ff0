#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "runtime/error.h"
#include "runtime/isa.h"

using namespace kv;

TEST_CASE("ISA names parse back to themselves", "[runtime]") {
  for (Isa isa : kAllIsas) CHECK(parse_isa(isa_name(isa), "test") == isa);
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
  for (Isa isa : kAllIsas) {
    if (!isa_supported(isa)) CHECK_THROWS_AS(resolve_isa(isa), InputError);
  }
#if defined(__x86_64__)
  for (Isa arm : {Isa::Neon, Isa::Dotprod, Isa::I8mm}) CHECK_FALSE(isa_supported(arm));
#elif defined(__aarch64__)
  for (Isa x86 : {Isa::Avx2, Isa::Avx512}) CHECK_FALSE(isa_supported(x86));
  CHECK(isa_supported(Isa::Neon));  // Advanced SIMD is part of every aarch64 CPU
  if (isa_supported(Isa::I8mm)) CHECK(isa_supported(Isa::Dotprod));
#endif
}

TEST_CASE("Run-time detection finds the paths the CPU offers", "[runtime]") {
  // ci/test.sh runs the Arm tests under qemu CPU models with known features and names the
  // paths each must offer (KVBENCH_EXPECT_ISAS, e.g. "scalar,neon,dotprod,i8mm"); elsewhere
  // there is nothing to compare against.
  const char* expected = std::getenv("KVBENCH_EXPECT_ISAS");
  if (expected == nullptr) return;
  std::string found;
  for (Isa isa : supported_isas()) found += (found.empty() ? "" : ",") + std::string(isa_name(isa));
  CHECK(found == expected);
}
