#include "prune_command.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include "cli.h"
#include "cli_checks.h"
#include "human_units.h"
#include "retention.h"
#include "run_workspace.h"
#include "runtime/error.h"

namespace kvbench {

namespace {

// A whole number, 0 or more, as typed: no sign, no fraction, no trailing text.
int whole_number(const std::string& text, const char* flag, const char* what) {
  const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
  errno = 0;
  const unsigned long long value = digits ? std::strtoull(text.c_str(), nullptr, 10) : 0;
  if (!digits || errno == ERANGE || value > static_cast<unsigned long long>(std::numeric_limits<int>::max())) {
    throw kv::InputError(flag, text.empty() ? "''" : text, fmt::format("not a whole number of {}, 0 or more", what));
  }
  return static_cast<int>(value);
}

std::string run_line(const RetentionRun& r) {
  return fmt::format("  run {:>5}  {:<16} {:<11} {}", r.id, r.suite.empty() ? "(no suite)" : r.suite, r.status, r.started_at);
}

std::string bytes_text(std::uint64_t bytes) { return fmt::format("{} bytes ({})", bytes, human_bytes(static_cast<double>(bytes))); }

std::string runs_text(std::size_t n) { return fmt::format("{} run{}", n, n == 1 ? "" : "s"); }

void print_plan(const PrunePlan& plan, const PruneOptions& options) {
  fmt::print("old: runs started at or before {} ({} days ago)\n", plan.cutoff, options.older_than_days);
  fmt::print("kept however old: {}runs a baseline, an acknowledgement or a live process holds, and the baselines of their gate verdicts\n",
             options.keep_per_suite > 0 ? fmt::format("the newest {} complete runs of each suite; ", options.keep_per_suite) : "");
  for (const KeptRun& k : plan.kept_old) fmt::print("{}  kept: {}\n", run_line(k.run), k.why);
}

void print_result(const PruneResult& result) {
  if (result.removed.empty()) fmt::print("nothing removed\n");
  else fmt::print("removed {}:\n", runs_text(result.removed.size()));
  for (const RetentionRun& r : result.removed) fmt::print("{}\n", run_line(r));
  for (const RetentionRun& r : result.spared) fmt::print("{}  kept: held by the time of removal\n", run_line(r));
  if (!result.removed.empty()) {
    std::string rows;
    for (const auto& [table, count] : result.rows_removed) rows += fmt::format("{}{} {}", rows.empty() ? "" : ", ", table, count);
    fmt::print("rows removed: {}\n", rows);
  }
  const std::uint64_t reclaimed = result.bytes_before > result.bytes_after ? result.bytes_before - result.bytes_after : 0;
  fmt::print("database: {} -> {}, {} reclaimed\n", bytes_text(result.bytes_before), bytes_text(result.bytes_after), bytes_text(reclaimed));
  if (!result.vacuum_error.empty()) {
    fmt::print(stderr, "kvbench: warning: the runs are removed but their space is not reclaimed yet ({}); the next prune reclaims it\n",
               result.vacuum_error);
  }
}

}  // namespace

void add_prune_command(CLI::App& app, PruneCommandOptions& o) {
  o.command = app.add_subcommand("prune", "Remove old runs nothing keeps (baselines, acknowledgements, the newest per suite) and reclaim the space");
  o.command->add_option("--older-than", o.older_than, "remove runs started at least DAYS days ago (a whole number)")->required();
  o.command->add_option("--keep", o.keep, "always keep the newest N complete runs of each suite")->capture_default_str();
  o.command->add_flag("--dry-run", o.dry_run, "list what would be removed and change nothing");
  add_db_option(o.command, "--db", o.db, "results database")->capture_default_str();
}

int run_prune(const PruneCommandOptions& o) {
  PruneOptions options;
  options.older_than_days = whole_number(o.older_than, "--older-than", "days");
  options.keep_per_suite = whole_number(o.keep, "--keep", "runs");
  // A missing, empty or foreign file is refused by a read-only open, never given a schema. A dry
  // run stays read-only and never writes.
  if (!o.dry_run) {
    const ResultsStore probe(o.db, Access::ReadOnly);
  }
  ResultsStore store(o.db, o.dry_run ? Access::ReadOnly : Access::ReadWrite);
  const PrunePlan plan = plan_prune(read_retention_input(store), options);
  print_plan(plan, options);
  if (o.dry_run) {
    fmt::print("would remove {}:\n", runs_text(plan.remove.size()));
    for (const RetentionRun& r : plan.remove) fmt::print("{}\n", run_line(r));
    fmt::print("dry run: nothing changed; the database holds {}\n", bytes_text(database_bytes(store)));
    return kExitOk;
  }
  print_result(apply_prune(store, plan));
  // The L2 directories beside the database that killed runs left (a live run's are kept).
  const std::string l2_base = default_l2_base(o.db);
  if (std::error_code ec; std::filesystem::is_directory(l2_base, ec)) {
    const int removed = remove_stale_run_dirs(l2_base);
    if (removed > 0) fmt::print("removed {} L2 director{} of killed runs under {}\n", removed, removed == 1 ? "y" : "ies", l2_base);
  }
  return kExitOk;
}

}  // namespace kvbench
