#include "run_heartbeat.h"

#include "sql_backend.h"
#include "store_location.h"

namespace kvbench {

RunHeartbeat::RunHeartbeat(const std::string& location, std::int64_t run_id, int timeout_s)
    : location_(location), run_id_(run_id), interval_(std::chrono::milliseconds(timeout_s * 1000 / 4)) {
  if (is_postgres_uri(location)) thread_ = std::thread([this] { beat(); });
}

RunHeartbeat::~RunHeartbeat() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void RunHeartbeat::beat() {
  std::unique_ptr<SqlConnection> connection;
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, interval_, [this] { return stop_; })) {
    lock.unlock();
    try {
      if (!connection) connection = postgres_connection(location_);
      auto update = connection->prepare("UPDATE runs SET heartbeat_at = " + now_sql(SqlDialect::Postgres) + " WHERE id = ? AND status = 'running'");
      update->bind(1, run_id_);
      update->step();
    } catch (const std::exception&) {
      // The server is away: the run's own writes report it; the next beat connects again.
      connection.reset();
    }
    lock.lock();
  }
}

}  // namespace kvbench
