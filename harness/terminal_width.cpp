#include "terminal_width.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace kvbench {

int terminal_columns(std::FILE* stream) {
  const int fd = ::fileno(stream);
  if (fd < 0 || ::isatty(fd) == 0) return 0;
  winsize size{};
  if (::ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  // A terminal that does not say its size (a serial console): the shell's idea of it.
  if (const char* columns = std::getenv("COLUMNS")) {
    char* end = nullptr;
    const long value = std::strtol(columns, &end, 10);
    if (end != columns && *end == '\0' && value > 0 && value < kUnlimitedColumns) return static_cast<int>(value);
  }
  return 0;
}

int summary_width(std::FILE* stream, bool wide) {
  if (wide) return kUnlimitedColumns;
  const int columns = terminal_columns(stream);
  return columns > 0 ? std::max(columns, kNarrowestColumns) : kLogColumns;
}

}  // namespace kvbench
