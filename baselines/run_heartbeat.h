// A run's heartbeat on a server, beaten from a thread and a connection of its own, so a
// repetition however long never reads as a writer gone: another machine knows a run is alive
// only by its beats (results_store.h, RunWriter).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace kvbench {

class RunHeartbeat {
 public:
  // Beats `run_id` of the server `location` four times per `timeout_s` (the run's heartbeat
  // timeout) until destroyed (a connection lost is tried again at the next beat); for a file
  // store it does nothing (its pid tells).
  RunHeartbeat(const std::string& location, std::int64_t run_id, int timeout_s);
  ~RunHeartbeat();
  RunHeartbeat(const RunHeartbeat&) = delete;
  RunHeartbeat& operator=(const RunHeartbeat&) = delete;

 private:
  void beat();

  std::string location_;
  std::int64_t run_id_;
  std::chrono::milliseconds interval_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace kvbench
