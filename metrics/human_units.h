// Figures for people: three significant digits, a unit that keeps at most three digits before
// the point (ms/s/min/h; B/KiB/MiB/GiB; k/M for rates) and never exponent notation. The stored
// values stay exact; this is only how the summary and the logs print them.
#pragma once

#include <string>

namespace kvbench {

// `digits` significant digits in fixed notation ("0.0990", "24.5", "85600"); magnitudes below
// 1e-5 print as "<0.00001", non-finite values as "nan"/"inf".
std::string significant(double value, int digits = 3);
// 850 us, 24.5 ms, 1.23 s, 14.3 min, 2.10 h.
std::string human_duration_ms(double ms);
// 512 B, 133 KiB, 1.50 GiB.
std::string human_bytes(double bytes);
// 15.5, 12.3k, 1.23M (a count per second, the unit said elsewhere).
std::string human_rate(double per_second);
// A whole count in full, digits grouped by thousands: "16,166,332" (rounded to the nearest one).
std::string grouped_count(double count);
// A metric's value by its unit in the metric table: ms and bytes as above, tokens/s as a rate,
// % with its sign, count as an integer, everything else (ratio, nats, ppl...) significant().
std::string human_value(double value, const std::string& unit);

// The unit a set of values reads best in, for an axis or a column: for ms and bytes the unit
// human_value would give the largest magnitude (values / divisor are in `unit`); any other unit
// as it is (divisor 1).
struct UnitScale {
  double divisor = 1.0;
  std::string unit;
};
UnitScale human_scale(const std::string& unit, double largest_magnitude);

}  // namespace kvbench
