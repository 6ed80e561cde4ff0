// KV storage formats. The tokens ("f32", "q4", ...) are the names used everywhere: configs,
// benchmark names and telemetry.
#pragma once

#include <cstdint>
#include <string_view>

namespace kv {

enum class Format : std::uint8_t {
  F32,  // the reference: stored as given
  F16,  // IEEE half
  FP8,  // E4M3 with one per-page scale (absmax / 448)
  Q8,   // 8-bit integer codes (K: asymmetric per channel; V: symmetric per token group)
  Q4,   // 4-bit integer codes, two per byte
  Q2,   // 2-bit integer codes, four per byte
};

inline constexpr Format kAllFormats[] = {Format::F32, Format::F16, Format::FP8,
                                         Format::Q8,  Format::Q4,  Format::Q2};

std::string_view format_name(Format format);
// Throws InputError naming `where` and the field when the token is unknown.
Format parse_format(std::string_view token, std::string_view where, std::string_view field);

// Bits of payload per stored value.
int format_bits(Format format);
bool is_integer_format(Format format);
// Largest code of an integer format (2^bits - 1); 0 for others.
int format_max_code(Format format);

}  // namespace kv
