#include <catch2/catch.hpp>

#include "quant/page_layout.h"
#include "runtime/error.h"

using namespace kv;

TEST_CASE("Page regions and sizes are 64-byte multiples for every format", "[quant]") {
  for (Format k : kAllFormats) {
    for (Format v : kAllFormats) {
      for (int tokens : {16, 64, 100, 256}) {
        for (int dim : {8, 24, 64, 128, 256}) {
          CAPTURE(format_name(k), format_name(v), tokens, dim);
          PageLayoutSpec spec{tokens, dim, k, v, 32, false};
          const PageLayout layout = PageLayout::make(spec);
          for (std::size_t offset : {layout.k_data, layout.v_data, layout.key_min, layout.key_max, layout.bytes}) {
            REQUIRE(offset % kPageAlign == 0);
          }
          REQUIRE(layout.k_data == sizeof(PageHeader));
          REQUIRE(layout.v_data >= layout.k_data + tokens * layout.k_row_bytes());
          REQUIRE(layout.key_max >= layout.key_min + dim * 2);
          REQUIRE(layout.bytes >= layout.content_bytes);
          spec.pad_to_4k = true;
          REQUIRE(PageLayout::make(spec).bytes % kDirectIoAlign == 0);
        }
      }
    }
  }
}

TEST_CASE("A q4 page of 64 tokens x 128 channels has the documented layout", "[quant]") {
  const PageLayout layout = PageLayout::make({64, 128, Format::Q4, Format::Q4, 32, false});
  CHECK(layout.k_row_bytes() == 64);
  CHECK(layout.v_row_bytes() == 64);
  CHECK(layout.v_groups() == 4);
  CHECK(layout.k_data == 64);
  CHECK(layout.v_data == 64 + 4096);
  CHECK(layout.k_scale == 64 + 8192);
  CHECK(layout.k_zero == layout.k_scale + 512);
  CHECK(layout.v_scale == layout.k_zero + 512);
  CHECK(layout.key_min == layout.v_scale + 64 * 4 * 2);
  CHECK(layout.bytes == layout.key_max + 256);
  CHECK(layout.k_read_bytes(64) == 4096 + 1024);
  CHECK(layout.v_read_bytes(64) == 4096 + 512);
}

TEST_CASE("The V group is clamped to head_dim", "[quant]") {
  CHECK(PageLayout::make({16, 8, Format::Q4, Format::Q4, 32, false}).v_group == 8);
  CHECK(PageLayout::make({16, 128, Format::Q4, Format::Q4, 64, false}).v_groups() == 2);
}

TEST_CASE("Any V group of whole 8-channel blocks that divides the head is taken", "[quant]") {
  for (int v_group : {8, 16, 24, 48}) {
    CAPTURE(v_group);
    const PageLayout layout = PageLayout::make({16, 48, Format::Q4, Format::Q4, v_group, false});
    CHECK(layout.v_group == v_group);
    CHECK(layout.v_groups() == 48 / v_group);
  }
  CHECK(PageLayout::make({16, 128, Format::Q8, Format::Q8, 16, false}).v_groups() == 8);
  CHECK(v_group_choices(48) == "8, 16, 24, 48");
  CHECK(v_group_choices(8) == "8");
}

TEST_CASE("Impossible page specs are refused with the field named", "[quant]") {
  CHECK_THROWS_WITH(PageLayout::make({8, 64, Format::Q4, Format::Q4, 32, false}), Catch::Contains("page_tokens"));
  CHECK_THROWS_WITH(PageLayout::make({512, 64, Format::Q4, Format::Q4, 32, false}), Catch::Contains("page_tokens"));
  CHECK_THROWS_WITH(PageLayout::make({64, 12, Format::Q4, Format::Q4, 32, false}), Catch::Contains("head_dim"));
  CHECK_THROWS_WITH(PageLayout::make({64, 0, Format::Q4, Format::Q4, 32, false}), Catch::Contains("head_dim"));
  CHECK_THROWS_WITH(PageLayout::make({64, 64, Format::Q4, Format::Q4, 12, false}),
                    Catch::Contains("v_group") && Catch::Contains("multiple of 8"));
  CHECK_THROWS_WITH(PageLayout::make({64, 64, Format::Q4, Format::Q4, 0, false}), Catch::Contains("v_group"));
  CHECK_THROWS_WITH(PageLayout::make({64, 40, Format::Q4, Format::Q4, 32, false}),
                    Catch::Contains("v_group") && Catch::Contains("32 does not divide head_dim 40") && Catch::Contains("8, 40"));
  CHECK_THROWS_WITH(PageLayout::make({64, 48, Format::Q4, Format::Q4, 32, false}),
                    Catch::Contains("head_dim 48") && Catch::Contains("8, 16, 24, 48"));
}
