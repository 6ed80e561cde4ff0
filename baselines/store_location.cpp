#include "store_location.h"

#include <map>
#include <mutex>

#include "runtime/error.h"
#include "sql_backend.h"

#ifdef KVBENCH_WITH_POSTGRES
#include <libpq-fe.h>
#endif

namespace kvbench {

namespace {

struct Credentials {
  std::mutex mutex;
  std::map<std::string, std::string> full_by_redacted;
};

Credentials& credentials() {
  static Credentials c;
  return c;
}

// The URI without a password in its user part (user:password@host) or its parameters.
std::string strip_password(const std::string& uri) {
  std::string out = uri;
  const std::size_t scheme = out.find("://");
  const std::size_t authority = scheme + 3;
  const std::size_t authority_end = std::min(out.find('/', authority), out.find('?', authority));
  const std::size_t at = out.rfind('@', authority_end == std::string::npos ? std::string::npos : authority_end);
  if (at != std::string::npos && at >= authority) {
    const std::size_t colon = out.find(':', authority);
    if (colon != std::string::npos && colon < at) out.erase(colon, at - colon);
  }
  const std::size_t query = out.find('?', authority);
  if (query == std::string::npos) return out;
  std::string params;
  std::size_t from = query + 1;
  while (from <= out.size()) {
    std::size_t to = out.find('&', from);
    if (to == std::string::npos) to = out.size();
    const std::string param = out.substr(from, to - from);
    if (!param.empty() && param.rfind("password=", 0) != 0) params += (params.empty() ? "" : "&") + param;
    from = to + 1;
  }
  return out.substr(0, query) + (params.empty() ? "" : "?" + params);
}

}  // namespace

bool is_postgres_uri(std::string_view db) { return db.rfind("postgresql://", 0) == 0 || db.rfind("postgres://", 0) == 0; }

std::string without_password(const std::string& db, const std::string& flag) {
  if (!is_postgres_uri(db)) return db;
  const std::string redacted = strip_password(db);
#ifdef KVBENCH_WITH_POSTGRES
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(db.c_str(), &error);
  if (options == nullptr) {
    std::string reason = error != nullptr ? error : "out of memory";
    PQfreemem(error);
    while (!reason.empty() && (reason.back() == '\n' || reason.back() == ' ')) reason.pop_back();
    // libpq's message may quote the URI: the password must not leave with it.
    if (const std::string full = db; reason.find(full) != std::string::npos) reason.replace(reason.find(full), full.size(), redacted);
    throw kv::InputError(redacted, flag, "not a PostgreSQL connection URI: " + reason);
  }
  PQconninfoFree(options);
#else
  throw kv::InputError(redacted, flag, "this kvbench was built without PostgreSQL (libpq): a results database here is a file");
#endif
  std::lock_guard lock(credentials().mutex);
  credentials().full_by_redacted[redacted] = db;
  return redacted;
}

std::string connect_string(const std::string& redacted) {
  std::lock_guard lock(credentials().mutex);
  const auto it = credentials().full_by_redacted.find(redacted);
  return it == credentials().full_by_redacted.end() ? redacted : it->second;
}

std::filesystem::path store_local_dir(const std::string& db) {
  if (is_postgres_uri(db)) return "kvbench-results";
  const std::filesystem::path file(db);
  return file.has_parent_path() ? file.parent_path() : std::filesystem::path(".");
}

}  // namespace kvbench
