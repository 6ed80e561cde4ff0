#include "calibrate_command.h"

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
  auto* db = o.command->add_option("--db", o.db, "results database whose runs will use the profile (socs/host.json beside it)")
                 ->capture_default_str();
  auto* out = o.command->add_option("--out", o.out, "write the profile here instead");
  db->excludes(out);
  o.command->add_option("--l2-dir", o.l2_dir, "existing directory to measure as L2 flash (default: l2/ beside the database)");
  o.command->add_option("--min-seconds", o.min_seconds, "least time per timed batch (three batches per figure)")
      ->check(CLI::Range(0.01, 10.0))
      ->capture_default_str();
  o.command->add_flag("--quick", o.quick, "smaller contexts, buffers and files, contexts not cycled out of the cache: seconds, rougher figures");
}

int run_calibrate(const CalibrateOptions& o) {
  const fs::path db(o.db);
  const fs::path beside = db.has_parent_path() ? db.parent_path() : fs::path(".");
  const std::string target = o.out.empty() ? host_profile_path(o.db) : o.out;
  CalibrationOptions options;
  options.min_seconds = o.min_seconds;
  options.quick = o.quick;
  options.l2_dir = o.l2_dir;
  std::error_code ec;
  if (options.l2_dir.empty()) {
    options.l2_dir = (beside / "l2").string();
    fs::create_directories(options.l2_dir, ec);
    if (ec) throw kv::InputError(options.l2_dir, "--l2-dir", "cannot create the default L2 directory: " + ec.message());
  } else if (!fs::is_directory(options.l2_dir, ec)) {
    throw kv::InputError(options.l2_dir, "--l2-dir", "not an existing directory");
  }
  const fs::path target_dir = fs::path(target).has_parent_path() ? fs::path(target).parent_path() : fs::path(".");
  fs::create_directories(target_dir, ec);
  if (ec) throw kv::InputError(target, o.out.empty() ? "--db" : "--out", "cannot create its directory: " + ec.message());
  const auto started = std::chrono::steady_clock::now();
  options.progress = [&](const std::string& line) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    fmt::print(stderr, "[{:5.1f} s] {}\n", s, line);
  };
  const kv::soc::SocProfile profile = calibrate_host(options);
  const std::string text = soc_profile_json(profile);
  parse_soc_profile(text, target);  // what we write must load
  // Written beside the target and renamed: a reader never sees half a profile.
  const std::string temporary = target + fmt::format(".tmp-{}", ::getpid());
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    file << text;
    file.close();
    if (!file) {
      fs::remove(temporary, ec);
      throw kv::InputError(target, "write", "cannot write the profile");
    }
  }
  fs::rename(temporary, target, ec);
  if (ec) {
    fs::remove(temporary, ec);
    throw kv::InputError(target, "rename", "cannot put the profile in place: " + ec.message());
  }
  fmt::print("host profile written to {}\n", target);
  if (o.out.empty()) fmt::print("runs into {} now price their host cases with it (re-run calibrate when kernels change)\n", o.db);
  return kExitOk;
}

}  // namespace kvbench
