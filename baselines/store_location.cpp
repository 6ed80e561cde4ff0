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

// The URI without a password in its user part (user:password@host) or its parameters. The user
// part ends where libpq ends it: at the first '@' before any '/' ('?' may be in a password).
std::string strip_password(const std::string& uri) {
  std::string out = uri;
  const std::size_t authority = out.find("://") + 3;
  std::size_t host = authority;  // where the host part starts: after the user part, if any
  if (const std::size_t at = out.find_first_of("@/", authority); at != std::string::npos && out[at] == '@') {
    const std::size_t colon = out.find(':', authority);
    host = colon != std::string::npos && colon < at ? colon : at;
    out.erase(host, at - host);
  }
  const std::size_t query = out.find('?', host);
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
    // libpq's message may quote a token of the URI, the password's among them (decoded).
    if (db != redacted) reason = "libpq cannot parse it";
    throw kv::InputError(redacted, flag, "not a PostgreSQL connection URI: " + reason);
  }
  PQconninfoFree(options);
  // What is shown must hold no password however the URI spelled it (a percent-encoded key):
  // libpq's own reading of the redacted form says.
  options = PQconninfoParse(redacted.c_str(), nullptr);
  bool kept = options == nullptr;
  for (PQconninfoOption* o = options; o != nullptr && o->keyword != nullptr; ++o) {
    if (std::string(o->keyword) == "password" && o->val != nullptr && *o->val != '\0') kept = true;
  }
  PQconninfoFree(options);
  if (kept) {
    throw kv::InputError(db.substr(0, db.find("://") + 3) + "...", flag,
                         "its password could not be taken out of the URI: give it by a pgpass file (PGPASSFILE) or PGPASSWORD instead");
  }
#else
  throw kv::InputError(redacted, flag, kNoPostgresBuild);
#endif
  // The same server named again without its password (--balance-from beside --db) keeps the
  // password it was given.
  if (db != redacted) {
    std::lock_guard lock(credentials().mutex);
    credentials().full_by_redacted[redacted] = db;
  }
  return redacted;
}

std::string redact_uris(std::string text) {
  for (const char* scheme : {"postgresql://", "postgres://"}) {
    for (std::size_t at = text.find(scheme); at != std::string::npos; at = text.find(scheme, at + 1)) {
      std::size_t end = text.find_first_of(" \t\n'\"`", at);
      if (end == std::string::npos) end = text.size();
      const std::string shown = strip_password(text.substr(at, end - at));
      text.replace(at, end - at, shown);
    }
  }
  return text;
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
