// How wide the summary may be: the terminal's own width when stdout is one (its window size,
// else $COLUMNS), 120 columns in a log or a pipe, no limit with --wide.
#pragma once

#include <cstdio>

namespace kvbench {

inline constexpr int kLogColumns = 120;     // a log or a pipe has no width: a readable one
inline constexpr int kNarrowestColumns = 40;  // below this a table cannot be read anyway
inline constexpr int kUnlimitedColumns = 1 << 20;

// The columns of the terminal `stream` writes to; 0 when it is not a terminal or says nothing.
int terminal_columns(std::FILE* stream);

// The width a summary printed on `stream` takes.
int summary_width(std::FILE* stream, bool wide);

}  // namespace kvbench
