// Escaping and the checks an SVG passes before a page inlines it.
#include <catch2/catch.hpp>

#include "html.h"

using namespace kvbench::report;

TEST_CASE("html: every special character is escaped", "[reports][html]") {
  CHECK(escape_html("<script>alert(1)</script>") == "&lt;script&gt;alert(1)&lt;/script&gt;");
  CHECK(escape_html("a \"b\" & 'c'") == "a &quot;b&quot; &amp; &#39;c&#39;");
  CHECK(escape_html("plain") == "plain");
  // What XML cannot hold, even escaped, reads as U+FFFD; valid UTF-8 passes as it is.
  CHECK(escape_html(std::string("a\x01" "b\x7f")) == "a\xEF\xBF\xBD" "b\xEF\xBF\xBD");
  CHECK(escape_html("tab\tnl\n") == "tab\tnl\n");
  CHECK(escape_html("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80") == "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  CHECK(escape_html("bad \xC3 \xFF \xC0\xAF \xED\xA0\x80") == "bad \xEF\xBF\xBD \xEF\xBF\xBD \xEF\xBF\xBD\xEF\xBF\xBD \xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  CHECK(well_formed_xml("<p>" + escape_html(std::string("x\x02\xFE\x80y", 6)) + "</p>"));
}

TEST_CASE("html: only well-formed SVG is inlined, without external references and with ids of its own", "[reports][html]") {
  const std::string svg = R"(<?xml version="1.0" encoding="utf-8" standalone="no"?>
<svg width="10" height="10" xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">
<title>Gnuplot</title><defs><path id='gpPt1' d='M0,0'/></defs><g id="gnuplot_canvas"><use xlink:href='#gpPt1' x='1' y='1'/></g></svg>)";
  CHECK(well_formed_xml(svg));
  const std::string inlined = inline_svg(svg, "p7-", "a <title>");
  REQUIRE_FALSE(inlined.empty());
  CHECK(inlined.rfind("<svg", 0) == 0);
  CHECK(inlined.find("http") == std::string::npos);
  CHECK(inlined.find("xlink") == std::string::npos);
  CHECK(inlined.find("id='p7-gpPt1'") != std::string::npos);
  CHECK(inlined.find("href='#p7-gpPt1'") != std::string::npos);
  CHECK(inlined.find("id=\"p7-gnuplot_canvas\"") != std::string::npos);
  CHECK(inlined.find("<title>a &lt;title&gt;</title>") != std::string::npos);
  CHECK(well_formed_xml(inlined));
  // Broken or hostile markup is refused.
  CHECK(inline_svg("<svg><g></svg>", "p-", "t").empty());
  CHECK(inline_svg("<svg><script>alert(1)</svg>", "p-", "t").empty());
  CHECK(inline_svg("<!DOCTYPE svg [<!ENTITY e SYSTEM \"file:///etc/passwd\">]><svg>&e;</svg>", "p-", "t").empty());
  CHECK(inline_svg("not svg at all", "p-", "t").empty());
}
