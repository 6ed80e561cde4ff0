// How a long run shows it is alive, on stderr: on a terminal one line redrawn in place (case
// i/n, repetition, ETA); in a log (stderr not a terminal) a line per finished repetition and
// per finished case, and a heartbeat line whenever nothing was said for `heartbeat_s` inside a
// long repetition. stdout stays the summary or the --json object only.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

namespace kvbench {

class Progress {
 public:
  enum class Mode { Off, Terminal, Log };
  // Terminal when `stream` is a terminal, else Log; Off when disabled.
  static Mode mode_for(std::FILE* stream, bool enabled);

  // `work`: the whole run's planned work, in any unit (the runner counts the positions each
  // engine run processes, so a 64K case weighs more than a 1K one, and a SoC's own runs count).
  // heartbeat_s: in a log, the longest silence inside a repetition (0: none).
  Progress(int cases, double work, Mode mode, std::FILE* out = stderr, double heartbeat_s = 30.0);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // A line about the whole run (what is planned), before its first case.
  void note(const std::string& text);
  // A repetition of case `case_index` (from 1) starts; `what` says which, `work` its share of
  // the planned work (while it runs, the ETA counts down its expected time instead of growing).
  void start(int case_index, const std::string& name, const std::string& what, double work = 0.0);
  void done(double work);
  // The repetition started last ended after `wall_s`: a log line.
  void repetition_done(double wall_s);
  // A case ended: one log line (a terminal shows it only when it did not complete). `took`
  // follows the status as written: " in 1.20 s", ", priced from the host run".
  void case_done(int case_index, const std::string& name, const std::string& status, const std::string& took);
  // Work that will not run (a skipped case, a SoC run the plan expected) leaves the total.
  void skip(double work);
  // Work found while running (a SoC's own run the plan did not expect) joins the total.
  void add(double work);
  void clear();

 private:
  std::string eta() const;  // with mutex_ held
  void line(const std::string& text);  // with mutex_ held: a whole line, the time noted
  void beat();

  int cases_;
  double total_;
  double done_ = 0.0;
  Mode mode_;
  std::FILE* out_;
  bool drawn_ = false;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  // What runs now, for the heartbeat.
  std::string current_;  // "[2/12] syn-7b/rag-16k/f16-full/host repetition 3/5"
  std::chrono::steady_clock::time_point current_since_{}, last_line_{};
  bool running_ = false;
  double current_work_ = 0.0;
  std::chrono::duration<double> heartbeat_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread heart_;
};

}  // namespace kvbench
