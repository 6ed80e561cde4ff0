#include <catch2/catch.hpp>

#include "runtime/error.h"
#include "sql_backend.h"
#include "store_location.h"

using namespace kvbench;

TEST_CASE("a file path is a file and stays as it is", "[store_location]") {
  CHECK_FALSE(is_postgres_uri("kvbench-results/results.sqlite"));
  CHECK_FALSE(is_postgres_uri("postgresql.sqlite"));
  CHECK(without_password("a/b.sqlite", "--db") == "a/b.sqlite");
  CHECK(store_local_dir("a/b.sqlite") == "a");
  CHECK(store_local_dir("b.sqlite") == ".");
}

TEST_CASE("a URI's password is kept for the connection alone", "[store_location]") {
  if (!postgres_available()) return;  // a build without libpq refuses a URI (next test)
  CHECK(is_postgres_uri("postgresql://h/db"));
  CHECK(is_postgres_uri("postgres://h/db"));
  CHECK(store_local_dir("postgresql://u:pw@h/db") == "kvbench-results");

  const std::string in_user = "postgresql://kvb:s3cret@db.example:5433/results?sslmode=require";
  const std::string shown = without_password(in_user, "--db");
  CHECK(shown == "postgresql://kvb@db.example:5433/results?sslmode=require");
  CHECK(connect_string(shown) == in_user);

  const std::string in_param = "postgresql:///results?host=/run/pg&password=s3cret&user=kvb";
  CHECK(without_password(in_param, "--db") == "postgresql:///results?host=/run/pg&user=kvb");
  CHECK(connect_string("postgresql:///results?host=/run/pg&user=kvb") == in_param);

  // A colon in the password, and an @ in the path after the host, are not the user part's end.
  CHECK(without_password("postgres://u:a:b@h/db", "--db") == "postgres://u@h/db");
  CHECK(without_password("postgresql://u@h/db", "--db") == "postgresql://u@h/db");
  // libpq ends the user part at the first @ before any /: a ? or : in a password is the password's.
  CHECK(without_password("postgresql://u:p?w:x@h/db?sslmode=disable", "--db") == "postgresql://u@h/db?sslmode=disable");
  // A password this cannot take out (a percent-encoded key) is refused, never shown.
  try {
    without_password("postgresql://u@h/db?pass%77ord=s3cret", "--db");
    FAIL("accepted");
  } catch (const kv::InputError& e) {
    CHECK(std::string(e.what()).find("s3cret") == std::string::npos);
    CHECK(std::string(e.what()).find("PGPASSFILE") != std::string::npos);
  }
  CHECK(without_password("postgresql://h/db?application_name=a@b", "--db") == "postgresql://h/db?application_name=a@b");
  // A URI never given here connects as it is (libpq's PGPASSFILE and PGPASSWORD supply the rest).
  CHECK(connect_string("postgresql://other@h/db") == "postgresql://other@h/db");
}

TEST_CASE("a malformed URI is refused naming the flag without its password", "[store_location]") {
  try {
    without_password("postgresql://kvb:s3cret@[bad", "--into");
    FAIL("accepted");
  } catch (const kv::InputError& e) {
    CHECK(e.field() == "--into");
    CHECK(std::string(e.what()).find("s3cret") == std::string::npos);
    CHECK(e.where() == "postgresql://kvb@[bad");
  }
}

TEST_CASE("a message echoing a URI shows it without its password", "[store_location]") {
  CHECK(redact_uris("kvbench: The following argument was not expected: postgresql://kvb:s3cret@h/db") ==
        "kvbench: The following argument was not expected: postgresql://kvb@h/db");
  CHECK(redact_uris("'postgres://a:b@h/x?password=c&sslmode=require' and postgresql://h/y") ==
        "'postgres://a@h/x?sslmode=require' and postgresql://h/y");
  CHECK(redact_uris("no URI here") == "no URI here");
}
