// `kvbench sim-repetition`: the child a sim run starts under callgrind (harness/sim_run.h), not a
// command for people (hidden from --help). In its own directory it reads the job, finds the
// run's suite again (refusing one that changed since the run began), prepares the one case and
// runs its engine once, Counted; it writes what it executed beside the job. With --probe FILE it
// writes the kernel paths it sees instead (under valgrind, those valgrind runs).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace kvbench {

struct SimRepetitionOptions {
  CLI::App* command = nullptr;
  std::string job;    // the job file (sim_job.h)
  std::string probe;  // --probe: write SimProbe here and stop
};

void add_sim_repetition_command(CLI::App& app, SimRepetitionOptions& options);
int run_sim_repetition(const SimRepetitionOptions& options);

}  // namespace kvbench
