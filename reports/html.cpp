#include "html.h"

#include <libxml/parser.h>

#include <cstdint>
#include <regex>
#include <set>

namespace kvbench::report {

std::string escape_html(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  const auto n = text.size();
  for (std::size_t i = 0; i < n;) {
    const auto c = static_cast<unsigned char>(text[i]);
    // XML admits no control character but tab, newline and carriage return, and only valid
    // UTF-8: anything else reads as U+FFFD.
    if (c < 0x80) {
      switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        case '\'': out += "&#39;"; break;
        default: out += (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f ? std::string("\xEF\xBF\xBD") : std::string(1, static_cast<char>(c));
      }
      ++i;
      continue;
    }
    const std::size_t len = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 0;
    bool valid = len > 0 && i + len <= n && c < 0xF5;
    std::uint32_t cp = len == 2 ? c & 0x1Fu : len == 3 ? c & 0x0Fu : c & 0x07u;
    for (std::size_t k = 1; valid && k < len; ++k) {
      const auto cc = static_cast<unsigned char>(text[i + k]);
      valid = (cc & 0xC0) == 0x80;
      cp = (cp << 6) | (cc & 0x3Fu);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8 either.
    valid = valid && !(len == 3 && cp < 0x800) && !(len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) && !(cp >= 0xD800 && cp <= 0xDFFF) &&
            cp != 0xFFFE && cp != 0xFFFF;
    if (valid) {
      out.append(text, i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

namespace {

void quiet(void*, const char*, ...) {}

}  // namespace

bool well_formed_xml(const std::string& text) {
  xmlSetGenericErrorFunc(nullptr, quiet);
  xmlDocPtr doc = xmlReadMemory(text.data(), static_cast<int>(text.size()), "plot.svg", "utf-8",
                                XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
  if (doc == nullptr) return false;
  xmlFreeDoc(doc);
  return true;
}

std::string inline_svg(const std::string& svg, const std::string& prefix, const std::string& title) {
  if (!well_formed_xml(svg)) return "";
  // gnuplot's svg terminal (without its mouse option) writes neither; a page takes neither.
  if (svg.find("<!DOCTYPE") != std::string::npos || svg.find("<!ENTITY") != std::string::npos || svg.find("<script") != std::string::npos ||
      svg.find("<foreignObject") != std::string::npos) {
    return "";
  }
  const std::size_t start = svg.find("<svg");
  const std::size_t end = svg.rfind("</svg>");
  if (start == std::string::npos || end == std::string::npos) return "";
  std::string s = svg.substr(start, end + 6 - start);
  s = std::regex_replace(s, std::regex(R"(\s+xmlns(:\w+)?\s*=\s*"[^"]*")"), "");
  s = std::regex_replace(s, std::regex(R"(xlink:href)"), "href");
  // Ids unique per plot: gnuplot names its markers and groups the same in every plot.
  std::set<std::string> ids;
  const std::regex id(R"(\bid\s*=\s*(['"])([^'"]+)\1)");
  for (auto it = std::sregex_iterator(s.begin(), s.end(), id); it != std::sregex_iterator(); ++it) ids.insert((*it)[2].str());
  s = std::regex_replace(s, id, "id=$1" + prefix + "$2$1");
  for (const std::string& name : ids) {
    const std::string escaped = std::regex_replace(name, std::regex(R"([.^$|()\[\]{}*+?\\])"), "\\$&");
    s = std::regex_replace(s, std::regex("#" + escaped + "(['\")])"), "#" + prefix + name + "$1");
  }
  s = std::regex_replace(s, std::regex(R"(<title>[^<]*</title>)"), "<title>" + escape_html(title) + "</title>", std::regex_constants::format_first_only);
  // The page scales plots to its width.
  const std::size_t tag = s.find('>');
  s.insert(tag, " class=\"plot\" role=\"img\"");
  if (!well_formed_xml(s)) return "";
  return s;
}

}  // namespace kvbench::report
