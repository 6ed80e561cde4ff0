// `kvbench calibrate [--db PATH | --out PATH] [--l2-dir DIR]`: measures this machine
// (harness/host_calibration.h) and writes the host profile that every later run into that
// database prices its `host` cases with: socs/host.json beside the database by default.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "store_location.h"

namespace kvbench {

struct CalibrateOptions {
  std::string db = kDefaultResultsDb;
  std::string out;     // "": socs/host.json beside the database
  std::string l2_dir;  // "": l2/ beside the database or the --out file (created)
  double min_seconds = 0.25;
  bool quick = false;
  CLI::App* command = nullptr;
};

void add_calibrate_command(CLI::App& app, CalibrateOptions& options);
int run_calibrate(const CalibrateOptions& options);

}  // namespace kvbench
