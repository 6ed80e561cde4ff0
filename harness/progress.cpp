#include "progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

#include "human_units.h"

namespace kvbench {

Progress::Mode Progress::mode_for(std::FILE* stream, bool enabled) {
  if (!enabled) return Mode::Off;
  return ::isatty(::fileno(stream)) != 0 ? Mode::Terminal : Mode::Log;
}

Progress::Progress(int cases, double work, Mode mode, std::FILE* out, double heartbeat_s)
    : cases_(cases), total_(work), mode_(mode), out_(out), heartbeat_(heartbeat_s) {
  if (mode_ == Mode::Log && heartbeat_s > 0.0) heart_ = std::thread([this] { beat(); });
}

Progress::~Progress() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (heart_.joinable()) heart_.join();
}

std::string Progress::eta() const {
  if (done_ <= 0.0) return "ETA -";
  if (done_ >= total_) return "ETA 0 s";
  const auto now = std::chrono::steady_clock::now();
  if (!running_) {
    const double elapsed_ms = std::chrono::duration<double, std::milli>(now - start_).count();
    return "ETA " + human_duration_ms(elapsed_ms / done_ * (total_ - done_));
  }
  // Inside a repetition: the rate of the work done before it, the repetition's expected time
  // less what it has run (never below zero), and the rest at that rate.
  const double before_ms = std::chrono::duration<double, std::milli>(current_since_ - start_).count();
  const double running_ms = std::chrono::duration<double, std::milli>(now - current_since_).count();
  const double per_unit = before_ms / done_;
  const double rest = std::max(0.0, total_ - done_ - current_work_);
  return "ETA " + human_duration_ms(std::max(0.0, per_unit * current_work_ - running_ms) + per_unit * rest);
}

void Progress::line(const std::string& text) {
  fmt::print(out_, "kvbench: {}\n", text);
  std::fflush(out_);
  last_line_ = std::chrono::steady_clock::now();
}

void Progress::note(const std::string& text) {
  std::lock_guard lock(mutex_);
  if (mode_ != Mode::Off) line(text);
}

void Progress::start(int case_index, const std::string& name, const std::string& what, double work) {
  std::lock_guard lock(mutex_);
  current_ = fmt::format("[{}/{}] {} {}", case_index, cases_, name, what);
  current_since_ = last_line_ = std::chrono::steady_clock::now();
  running_ = true;
  current_work_ = work;
  if (mode_ != Mode::Terminal) return;
  fmt::print(out_, "\r\033[K{} ({})", current_, eta());
  std::fflush(out_);
  drawn_ = true;
}

void Progress::done(double work) {
  std::lock_guard lock(mutex_);
  done_ += work;
  running_ = false;  // the repetition's work is counted: no heartbeat, the plain rate again
  current_work_ = 0.0;
}

void Progress::repetition_done(double wall_s) {
  std::lock_guard lock(mutex_);
  running_ = false;
  if (mode_ == Mode::Log) line(fmt::format("{} done in {} ({})", current_, human_duration_ms(wall_s * 1e3), eta()));
}

void Progress::case_done(int case_index, const std::string& name, const std::string& status, const std::string& took) {
  std::lock_guard lock(mutex_);
  running_ = false;
  if (mode_ == Mode::Off || (mode_ == Mode::Terminal && status == "complete")) return;
  if (mode_ == Mode::Terminal && drawn_) fmt::print(out_, "\r\033[K");
  drawn_ = false;
  line(fmt::format("[{}/{}] {} {}{} ({})", case_index, cases_, name, status, took, eta()));
}

void Progress::skip(double work) {
  std::lock_guard lock(mutex_);
  total_ -= work;
}

void Progress::add(double work) {
  std::lock_guard lock(mutex_);
  total_ += work;
}

void Progress::clear() {
  std::lock_guard lock(mutex_);
  if (mode_ == Mode::Terminal && drawn_) fmt::print(out_, "\r\033[K");
  drawn_ = false;
}

void Progress::beat() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    const auto next = last_line_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(heartbeat_);
    if (running_ && std::chrono::steady_clock::now() >= next) {
      const double running_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - current_since_).count();
      line(fmt::format("{} still running after {} ({})", current_, human_duration_ms(running_ms), eta()));
      continue;
    }
    if (running_) {
      wake_.wait_until(lock, next);
    } else {
      wake_.wait_for(lock, heartbeat_);
    }
  }
}

}  // namespace kvbench
