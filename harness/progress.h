// How a long run shows it is alive, on stderr: on a terminal one line redrawn in place (case
// i/n, repetition, ETA); in a log (stderr not a terminal) one line per finished case (name,
// status, wall time, ETA). stdout stays the summary or the --json object only.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace kvbench {

class Progress {
 public:
  enum class Mode { Off, Terminal, Log };
  // Terminal when `stream` is a terminal, else Log; Off when disabled.
  static Mode mode_for(std::FILE* stream, bool enabled);

  // `work`: the whole run's work, in any unit (the runner counts the positions each repetition
  // processes, so a 64K case weighs more than a 1K one in the ETA).
  Progress(int cases, double work, Mode mode, std::FILE* out = stderr);
  // A repetition of case `case_index` (from 1) starts; `what` says which.
  void start(int case_index, const std::string& name, const std::string& what);
  void done(double work) { done_ += work; }
  // A case ended: one log line (a terminal shows it only when it did not complete).
  void case_done(int case_index, const std::string& name, const std::string& status, double wall_s);
  // Work that will not run (a skipped case) leaves the total.
  void skip(double work) { total_ -= work; }
  // Work found while running (a SoC's own engine runs) joins the total.
  void add(double work) { total_ += work; }
  void clear();

 private:
  std::string eta() const;

  int cases_;
  double total_;
  double done_ = 0.0;
  Mode mode_;
  std::FILE* out_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace kvbench
