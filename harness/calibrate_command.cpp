#include "calibrate_command.h"

#include "cli_checks.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "cli.h"
#include "host_calibration.h"
#include "runtime/error.h"
#include "soc_profiles.h"

namespace kvbench {

namespace fs = std::filesystem;

void add_calibrate_command(CLI::App& app, CalibrateOptions& o) {
  o.command = app.add_subcommand("calibrate", "Measure this machine and write the host SoC profile that runs into the database use");
  auto* db = add_db_option(o.command, "--db", o.db, "results database whose runs will use the profile (socs/host.json beside it)")
                 ->capture_default_str();
  auto* out = o.command->add_option("--out", o.out, "write the profile here instead");
  db->excludes(out);
  o.command->add_option("--l2-dir", o.l2_dir, "existing directory to measure as L2 flash (default: l2/ beside the database, or beside --out)");
  o.command->add_option("--min-seconds", o.min_seconds, "least time per repetition of each benchmark (three repetitions, the median kept)")
      ->check(number_in(0.01, 10.0))
      ->capture_default_str();
  // No duration promised: it is the machine's (docs/cost-model.md gives measured ones).
  o.command->add_flag("--quick", o.quick,
                      "smaller contexts, buffers and files, contexts not cycled out of the cache: less time than a full "
                      "calibration, rougher figures (for checks, not for validating the model)");
}

int run_calibrate(const CalibrateOptions& o) {
  const std::string target = o.out.empty() ? host_profile_path(o.db) : o.out;
  const char* const target_flag = o.out.empty() ? "--db" : "--out";
  const fs::path target_dir = fs::path(target).has_parent_path() ? fs::path(target).parent_path() : fs::path(".");
  std::error_code ec;
  // Every target checked before a minute of measuring: an --out that is a directory or lies in
  // one that does not exist, a place the profile cannot be written.
  if (fs::is_directory(target, ec)) {
    throw kv::InputError(target, target_flag, "is a directory; give the profile's file name (for example " + (fs::path(target) / "host.json").string() + ")");
  }
  if (!o.out.empty() && !fs::is_directory(target_dir, ec)) {
    throw kv::InputError(target, "--out", "its directory does not exist (" + target_dir.string() + ")");
  }
  if (o.out.empty()) {
    // The profile's place beside the database (socs/) is made; a database file's own directory
    // must exist. A server's local directory (kvbench-results/) is made with socs/.
    const fs::path db_dir = store_local_dir(o.db);
    if (!is_postgres_uri(o.db) && !fs::is_directory(db_dir, ec) && o.db != CalibrateOptions{}.db) {
      throw kv::InputError(o.db, "--db", "its directory does not exist (" + db_dir.string() + ")");
    }
    fs::create_directories(target_dir, ec);
    if (ec) throw kv::InputError(target, "--db", "cannot create its directory: " + ec.message());
  }
  const std::string temporary = target + fmt::format(".tmp-{}", ::getpid());
  {
    std::ofstream probe(temporary, std::ios::binary | std::ios::trunc);
    const bool writable = static_cast<bool>(probe);
    probe.close();
    fs::remove(temporary, ec);
    if (!writable) throw kv::InputError(target, target_flag, "cannot write there");
  }
  CalibrationOptions options;
  options.min_seconds = o.min_seconds;
  options.quick = o.quick;
  options.l2_dir = o.l2_dir;
  if (options.l2_dir.empty()) {
    // Beside what calibrate writes: the database's local directory, or the --out file's.
    const fs::path beside = !o.out.empty() ? target_dir : store_local_dir(o.db);
    options.l2_dir = (beside / "l2").string();
    fs::create_directories(options.l2_dir, ec);
    if (ec) throw kv::InputError(options.l2_dir, "--l2-dir", "cannot create the default L2 directory: " + ec.message());
  } else if (!fs::is_directory(options.l2_dir, ec)) {
    throw kv::InputError(options.l2_dir, "--l2-dir", "not an existing directory");
  }
  const auto started = std::chrono::steady_clock::now();
  options.progress = [&](const std::string& line) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    fmt::print(stderr, "[{:5.1f} s] {}\n", s, line);
  };
  const kv::soc::SocProfile profile = calibrate_host(options);
  const std::string text = soc_profile_json(profile);
  parse_soc_profile(text, target);  // what we write must load
  // Written beside the target and renamed: a reader never sees half a profile.
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    file << text;
    file.close();
    if (!file) {
      fs::remove(temporary, ec);
      throw kv::InputError(target, target_flag, "cannot write the profile");
    }
  }
  fs::rename(temporary, target, ec);
  if (ec) {
    const std::string why = ec.message();
    fs::remove(temporary, ec);
    throw kv::InputError(target, target_flag, "cannot put the profile in place: " + why);
  }
  fmt::print("host profile written to {}\n", target);
  if (o.out.empty()) fmt::print("runs into {} now price their host cases with it (re-run calibrate when kernels change)\n", o.db);
  return kExitOk;
}

}  // namespace kvbench
