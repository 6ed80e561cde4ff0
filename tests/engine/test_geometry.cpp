#include <catch2/catch.hpp>

#include "geometry.h"
#include "runtime/error.h"

using namespace kv;

TEST_CASE("Impossible geometries are refused with the field named", "[engine]") {
  const ModelGeometry good{2, 8, 2, 64, 1024};
  CHECK_NOTHROW(validate_geometry(good, "model.json"));
  CHECK(good.group() == 4);
  auto with = [&](auto change) {
    ModelGeometry g = good;
    change(g);
    return g;
  };
  CHECK_THROWS_WITH(validate_geometry(with([](auto& g) { g.kv_heads = 0; }), "model.json"),
                    Catch::Contains("model.json") && Catch::Contains("kv_heads"));
  CHECK_THROWS_WITH(validate_geometry(with([](auto& g) { g.q_heads = 0; }), "m"), Catch::Contains("q_heads"));
  CHECK_THROWS_WITH(validate_geometry(with([](auto& g) { g.layers = -1; }), "m"), Catch::Contains("layers"));
  CHECK_THROWS_WITH(validate_geometry(with([](auto& g) { g.kv_heads = 3; }), "m"), Catch::Contains("multiple"));
  CHECK_THROWS_WITH(validate_geometry(with([](auto& g) { g.head_dim = 12; }), "m"), Catch::Contains("head_dim"));
  CHECK_THROWS_WITH(validate_geometry(with([](auto& g) { g.max_seq = 0; }), "m"), Catch::Contains("max_seq"));
}
