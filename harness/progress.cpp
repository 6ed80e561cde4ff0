#include "progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include "human_units.h"

namespace kvbench {

Progress::Mode Progress::mode_for(std::FILE* stream, bool enabled) {
  if (!enabled) return Mode::Off;
  return ::isatty(::fileno(stream)) != 0 ? Mode::Terminal : Mode::Log;
}

Progress::Progress(int cases, double work, Mode mode, std::FILE* out) : cases_(cases), total_(work), mode_(mode), out_(out) {}

std::string Progress::eta() const {
  if (done_ <= 0.0) return "ETA -";
  if (done_ >= total_) return "ETA 0 s";
  const double elapsed_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
  return "ETA " + human_duration_ms(elapsed_ms / done_ * (total_ - done_));
}

void Progress::start(int case_index, const std::string& name, const std::string& what) {
  if (mode_ != Mode::Terminal) return;
  fmt::print(out_, "\r\033[K[{}/{}] {} {} ({})", case_index, cases_, name, what, eta());
  std::fflush(out_);
  drawn_ = true;
}

void Progress::case_done(int case_index, const std::string& name, const std::string& status, double wall_s) {
  if (mode_ == Mode::Off || (mode_ == Mode::Terminal && status == "complete")) return;
  clear();
  fmt::print(out_, "kvbench: [{}/{}] {} {} in {} ({})\n", case_index, cases_, name, status, human_duration_ms(wall_s * 1e3), eta());
  std::fflush(out_);
}

void Progress::clear() {
  if (mode_ == Mode::Terminal && drawn_) fmt::print(out_, "\r\033[K");
  drawn_ = false;
}

}  // namespace kvbench
