// What a report page needs to stay safe and self-contained: every string from a suite, a tag,
// an error or an event escaped; gnuplot's SVG embedded only once it parses as well-formed XML,
// with its external references (namespace URLs, xlink) removed and its ids made unique per
// plot, so many plots share one page.
#pragma once

#include <string>

namespace kvbench::report {

// Text and attribute values: & < > " ' escaped.
std::string escape_html(const std::string& text);

// Whether `text` parses as well-formed XML (libxml2, no network, no entities from outside).
bool well_formed_xml(const std::string& text);

// gnuplot's SVG ready to inline: the XML declaration, doctype and namespace declarations
// dropped, xlink:href spelt href, ids prefixed with `prefix`, and a <title> of `title`
// (escaped). Returns "" when the input or the result is not well-formed XML, or when it holds
// a doctype, an entity, a script or a foreign object.
std::string inline_svg(const std::string& svg, const std::string& prefix, const std::string& title);

}  // namespace kvbench::report
