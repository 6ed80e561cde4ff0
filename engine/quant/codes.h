// Packing of integer codes inside a token row (see page_layout.h for the bit layout).
#pragma once

#include <cstdint>

#include "quant/format.h"

namespace kv {

// q4 packs channels in blocks of 64: byte j of a full block holds channel j in its low nibble
// and channel j + 32 in its high nibble, so one AND and one shift of the block's 32 bytes give
// its channels in order (the integer decode kernels rely on this). Channels after the last full
// block (head_dim % 64) pair up as 2k (low) and 2k + 1 (high) in byte k of the row.
inline int q4_byte(int channel, int dim, int& shift) {
  const int base = channel & ~63;
  if (base + 64 <= dim) {
    shift = (channel & 32) != 0 ? 4 : 0;
    return base / 2 + (channel & 31);
  }
  shift = (channel & 1) * 4;
  return channel >> 1;
}

inline int load_code(const std::uint8_t* row, int channel, Format format, int dim) {
  switch (format) {
    case Format::Q8: return row[channel];
    case Format::Q4: {
      int shift = 0;
      const int byte = q4_byte(channel, dim, shift);
      return (row[byte] >> shift) & 0x0F;
    }
    case Format::Q2: return (row[channel >> 2] >> ((channel & 3) * 2)) & 0x03;
    default: return 0;
  }
}

// The row must be zeroed before codes are stored (q4/q2 share bytes between channels).
inline void store_code(std::uint8_t* row, int channel, int code, Format format, int dim) {
  const auto value = static_cast<std::uint8_t>(code);
  switch (format) {
    case Format::Q8: row[channel] = value; break;
    case Format::Q4: {
      int shift = 0;
      const int byte = q4_byte(channel, dim, shift);
      row[byte] = static_cast<std::uint8_t>(row[byte] | (value << shift));
      break;
    }
    case Format::Q2: row[channel >> 2] = static_cast<std::uint8_t>(row[channel >> 2] | (value << ((channel & 3) * 2))); break;
    default: break;
  }
}

// V codes are symmetric midrise: value = (code - midpoint) * scale.
inline float v_code_midpoint(Format format) { return static_cast<float>(format_max_code(format)) * 0.5f; }

}  // namespace kv
