// Where the results store lives: a SQLite file (the default) or a PostgreSQL server named by a
// `postgresql://` URI. A URI's password never travels further than the command line: the CLI
// hands every `--db` through without_password(), which keeps the full URI here (by the redacted
// form it returns) for the connection alone, so what the program prints, stores or passes to
// another process is the URI without its password.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace kvbench {

inline constexpr const char* kDefaultResultsDb = "kvbench-results/results.sqlite";

// Whether `db` names a PostgreSQL server (postgresql:// or postgres://) rather than a file.
bool is_postgres_uri(std::string_view db);

// `db` with the password of a PostgreSQL URI removed (from the user part and from a
// `password=` parameter); a file path as it is. The full URI is remembered for connect_string().
// Throws kv::InputError(db redacted, flag, reason) for a URI libpq cannot parse.
std::string without_password(const std::string& db, const std::string& flag);

// `text` (a message) with the password taken out of every PostgreSQL URI in it: for what echoes
// the raw command line (a usage error naming a misplaced argument).
std::string redact_uris(std::string text);

// What libpq connects with for a URI without_password() returned: the full URI as given.
std::string connect_string(const std::string& redacted);

// The directory that holds what a run keeps beside its store (the default L2 directory, the
// host SoC profile): the file's directory, or ./kvbench-results for a server.
std::filesystem::path store_local_dir(const std::string& db);

}  // namespace kvbench
