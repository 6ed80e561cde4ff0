#include "quant/format.h"

#include <string>

#include "runtime/error.h"

namespace kv {

std::string_view format_name(Format format) {
  switch (format) {
    case Format::F32: return "f32";
    case Format::F16: return "f16";
    case Format::FP8: return "fp8";
    case Format::Q8: return "q8";
    case Format::Q4: return "q4";
    case Format::Q2: return "q2";
  }
  return "unknown";
}

Format parse_format(std::string_view token, std::string_view where, std::string_view field) {
  for (Format format : kAllFormats) {
    if (token == format_name(format)) return format;
  }
  throw InputError(std::string(where), std::string(field),
                   "unknown format '" + std::string(token) + "' (expected f32, f16, fp8, q8, q4 or q2)");
}

int format_bits(Format format) {
  switch (format) {
    case Format::F32: return 32;
    case Format::F16: return 16;
    case Format::FP8:
    case Format::Q8: return 8;
    case Format::Q4: return 4;
    case Format::Q2: return 2;
  }
  return 0;
}

bool is_integer_format(Format format) {
  return format == Format::Q8 || format == Format::Q4 || format == Format::Q2;
}

int format_max_code(Format format) {
  return is_integer_format(format) ? (1 << format_bits(format)) - 1 : 0;
}

}  // namespace kv
