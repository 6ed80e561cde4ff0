// What the end-to-end tests share: running the real kvbench binary (KVBENCH_BIN) and reading
// the databases it writes with plain SQL.
#pragma once

#include <string>
#include <vector>

namespace kvtest {

struct Output {
  int status = -1;   // the exit code; -1 when killed by a signal
  std::string text;  // stdout and stderr
};

// `kvbench <args>` through the shell, stdout and stderr together.
Output run_kvbench(const std::string& args);
// The same with `dir` as the working directory (relative paths in args and messages).
Output run_kvbench_in(const std::string& dir, const std::string& args);

// The same on a pseudo-terminal `columns` wide: stdout and stderr are the terminal (line ends
// come back as "\n").
Output run_kvbench_tty(const std::string& args, int columns);

// Rows of a query as strings ("NULL" for NULL), on a read-only connection.
std::vector<std::vector<std::string>> sql(const std::string& db_path, const std::string& query);
// The one value of a one-row query.
std::string sql_value(const std::string& db, const std::string& query);
// The same for a database another process may be creating: "" while it has no such table yet
// (or no file), never a test failure.
std::string sql_value_if_ready(const std::string& db, const std::string& query);

void write_file(const std::string& path, const std::string& text);
// A file's bytes ("" when it cannot be read).
std::string read_file(const std::string& path);

}  // namespace kvtest
