// Packing of integer codes inside a token row (see page_layout.h for the bit layout).
#pragma once

#include <cstdint>

#include "quant/format.h"

namespace kv {

inline int load_code(const std::uint8_t* row, int channel, Format format) {
  switch (format) {
    case Format::Q8: return row[channel];
    case Format::Q4: return (row[channel >> 1] >> ((channel & 1) * 4)) & 0x0F;
    case Format::Q2: return (row[channel >> 2] >> ((channel & 3) * 2)) & 0x03;
    default: return 0;
  }
}

// The row must be zeroed before codes are stored (q4/q2 share bytes between channels).
inline void store_code(std::uint8_t* row, int channel, int code, Format format) {
  const auto value = static_cast<std::uint8_t>(code);
  switch (format) {
    case Format::Q8: row[channel] = value; break;
    case Format::Q4: row[channel >> 1] = static_cast<std::uint8_t>(row[channel >> 1] | (value << ((channel & 1) * 4))); break;
    case Format::Q2: row[channel >> 2] = static_cast<std::uint8_t>(row[channel >> 2] | (value << ((channel & 3) * 2))); break;
    default: break;
  }
}

// V codes are symmetric midrise: value = (code - midpoint) * scale.
inline float v_code_midpoint(Format format) { return static_cast<float>(format_max_code(format)) * 0.5f; }

}  // namespace kv
