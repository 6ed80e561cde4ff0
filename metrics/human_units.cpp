#include "human_units.h"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <utility>

namespace kvbench {

namespace {

// value rounded to `digits` significant digits, and the decimals that shows them.
std::pair<double, int> round_significant(double value, int digits) {
  if (value == 0.0) return {0.0, digits - 1};
  int exponent = static_cast<int>(std::floor(std::log10(std::fabs(value))));
  double scale = std::pow(10.0, digits - 1 - exponent);
  double rounded = std::round(value * scale) / scale;
  // 9.996 rounds up to 10.0: one more digit before the point.
  if (std::fabs(rounded) >= std::pow(10.0, exponent + 1)) {
    ++exponent;
    scale = std::pow(10.0, digits - 1 - exponent);
    rounded = std::round(value * scale) / scale;
  }
  return {rounded, std::max(0, digits - 1 - exponent)};
}

// The value in the largest unit where it reads at least 1 (after rounding); units[i] is
// factors[i] times the base.
template <std::size_t N>
std::string scaled(double value, const std::array<const char*, N>& units, const std::array<double, N>& factors,
                   const char* separator) {
  if (!std::isfinite(value)) return significant(value);
  std::size_t unit = 0;
  for (std::size_t i = 1; i < N; ++i) {
    if (round_significant(std::fabs(value) / factors[i], 3).first >= 1.0) unit = i;
  }
  return significant(value / factors[unit]) + separator + units[unit];
}

}  // namespace

std::string significant(double value, int digits) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == 0.0) return "0";
  if (std::fabs(value) < 1e-5) return value > 0 ? "<0.00001" : ">-0.00001";
  const auto [rounded, decimals] = round_significant(value, digits);
  return fmt::format("{:.{}f}", rounded, decimals);
}

std::string human_duration_ms(double ms) {
  static constexpr std::array<const char*, 5> kUnits = {"us", "ms", "s", "min", "h"};
  static constexpr std::array<double, 5> kFactors = {1e-3, 1.0, 1e3, 6e4, 3.6e6};
  if (ms == 0.0) return "0 ms";
  return scaled(ms, kUnits, kFactors, " ");
}

std::string human_bytes(double bytes) {
  static constexpr std::array<const char*, 5> kUnits = {"B", "KiB", "MiB", "GiB", "TiB"};
  static constexpr std::array<double, 5> kFactors = {1.0, 1024.0, 1048576.0, 1073741824.0, 1099511627776.0};
  if (std::fabs(bytes) < 1000.0) return fmt::format("{:.0f} B", bytes);
  // Switch units at 1000, not 1024: never four digits before the point.
  std::size_t unit = 0;
  for (std::size_t i = 1; i < kUnits.size(); ++i) {
    if (std::fabs(bytes) / kFactors[i - 1] >= 999.5) unit = i;
  }
  return significant(bytes / kFactors[unit]) + " " + kUnits[unit];
}

std::string human_rate(double per_second) {
  static constexpr std::array<const char*, 4> kUnits = {"", "k", "M", "G"};
  static constexpr std::array<double, 4> kFactors = {1.0, 1e3, 1e6, 1e9};
  return scaled(per_second, kUnits, kFactors, "");
}

std::string grouped_count(double count) {
  if (!std::isfinite(count)) return significant(count);
  const std::string digits = fmt::format("{:.0f}", std::fabs(count));
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (count < 0 && digits != "0" ? "-" : "") + out;
}

std::string human_value(double value, const std::string& unit) {
  if (unit == "ms") return human_duration_ms(value);
  if (unit == "bytes") return human_bytes(value);
  if (unit == "tokens/s") return human_rate(value);
  if (unit == "%") return (value > 0 ? "+" : "") + significant(value) + "%";
  if (unit == "count") return std::fabs(value) < 1e6 ? fmt::format("{:.0f}", value) : human_rate(value);
  if (unit == "GB/s") return significant(value) + " GB/s";
  return significant(value);
}

UnitScale human_scale(const std::string& unit, double largest) {
  const double m = std::isfinite(largest) ? std::fabs(largest) : 0.0;
  if (unit == "ms") {
    static constexpr std::array<const char*, 5> kUnits = {"us", "ms", "s", "min", "h"};
    static constexpr std::array<double, 5> kFactors = {1e-3, 1.0, 1e3, 6e4, 3.6e6};
    if (m == 0.0) return {1.0, "ms"};
    std::size_t at = 0;
    for (std::size_t i = 1; i < kUnits.size(); ++i) {
      if (round_significant(m / kFactors[i], 3).first >= 1.0) at = i;
    }
    return {kFactors[at], kUnits[at]};
  }
  if (unit == "bytes") {
    static constexpr std::array<const char*, 5> kUnits = {"B", "KiB", "MiB", "GiB", "TiB"};
    static constexpr std::array<double, 5> kFactors = {1.0, 1024.0, 1048576.0, 1073741824.0, 1099511627776.0};
    std::size_t at = 0;
    for (std::size_t i = 1; i < kUnits.size(); ++i) {
      if (m / kFactors[i - 1] >= 999.5) at = i;
    }
    return {kFactors[at], kUnits[at]};
  }
  return {1.0, unit};
}

}  // namespace kvbench
