#include "e2e/e2e_support.h"

#include <pty.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace kvtest {

namespace {

Output run_command(const std::string& command) {
  Output out;
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) out.text += buffer;
  const int status = ::pclose(pipe);
  out.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

}  // namespace

Output run_kvbench(const std::string& args) { return run_command(std::string(KVBENCH_BIN) + " " + args + " 2>&1"); }

Output run_kvbench_in(const std::string& dir, const std::string& args) {
  return run_command("cd '" + dir + "' && " + std::string(KVBENCH_BIN) + " " + args + " 2>&1");
}

Output run_kvbench_tty(const std::string& args, int columns) {
  winsize size{};
  size.ws_row = 50;
  size.ws_col = static_cast<unsigned short>(columns);
  int master = -1;
  const pid_t pid = ::forkpty(&master, nullptr, nullptr, &size);
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const std::string command = std::string(KVBENCH_BIN) + " " + args;
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  Output out;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(master, buffer, sizeof buffer);
    if (n > 0) {
      out.text.append(buffer, static_cast<std::size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;  // EIO: the child closed the terminal
    }
  }
  ::close(master);
  int status = 0;
  ::waitpid(pid, &status, 0);
  out.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::string text;
  for (char c : out.text) {
    if (c != '\r') text += c;
  }
  out.text = text;
  return out;
}

std::vector<std::vector<std::string>> sql(const std::string& db_path, const std::string& query) {
  // Read-only unless the statement writes: a test's own edit of a database must not fail silently.
  const bool writes = query.rfind("SELECT", 0) != 0 && query.rfind("PRAGMA", 0) != 0;
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(db_path.c_str(), &db, writes ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_busy_timeout(db, 10000);
  sqlite3_stmt* stmt = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, query.c_str(), -1, &stmt, nullptr) == SQLITE_OK);
  std::vector<std::vector<std::string>> rows;
  int step = SQLITE_ROW;
  while ((step = sqlite3_step(stmt)) == SQLITE_ROW) {
    std::vector<std::string> row;
    for (int c = 0; c < sqlite3_column_count(stmt); ++c) {
      const auto* text = sqlite3_column_text(stmt, c);
      row.emplace_back(text == nullptr ? "NULL" : reinterpret_cast<const char*>(text));
    }
    rows.push_back(std::move(row));
  }
  INFO(query << ": " << sqlite3_errmsg(db));
  CHECK(step == SQLITE_DONE);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return rows;
}

std::string sql_value(const std::string& db, const std::string& query) {
  const auto rows = sql(db, query);
  REQUIRE(rows.size() == 1);
  return rows[0][0];
}

std::string sql_value_if_ready(const std::string& db_path, const std::string& query) {
  sqlite3* db = nullptr;
  std::string value;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_busy_timeout(db, 10000);
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, query.c_str(), -1, &stmt, nullptr) == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW) {
      const auto* text = sqlite3_column_text(stmt, 0);
      if (text != nullptr) value = reinterpret_cast<const char*>(text);
    }
    sqlite3_finalize(stmt);
  }
  sqlite3_close(db);
  return value;
}

void write_file(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace kvtest
