// A stored run as the readers see it: its header and, per case, the median over the stored
// repetitions of every metric, with the marks the summary prints and the degradation in plain
// words. `show`, `run`'s summary and the JSON forms are views of this one structure.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "metric_table.h"
#include "results_store.h"

namespace kvbench {

struct CaseFigure {
  std::optional<double> median;  // nullopt: no repetition has a value (na_reason says why)
  std::string na_reason;
  bool extrapolated = false;     // some repetition's value was extrapolated
  bool noisy = false;            // some repetition was noisy
};

struct CaseView {
  std::string name, model, workload, policy, soc;
  std::string status;  // running, complete, skipped, failed
  std::string note;    // the skip reason or the error ("interrupted")
  int repetitions = 0; // stored
  std::map<std::string, CaseFigure> figures;
  std::vector<std::string> degradation;  // plain lines; empty: not degraded
  int degraded_repetitions = 0;
  // How the case was priced for its SoC when that was not the host run as it is: why it reran
  // with the SoC's capacities (capacity_rerun) or why it does not fit (fits_in_memory 0).
  std::vector<std::string> pricing;
  // Which timings `figures` holds: the view's (RunView::timing), or Model for a case with no
  // measured figure on a host view (load_run_view_measured_or_modelled).
  Clock timing = Clock::Host;
};

struct RunView {
  std::int64_t id = 0;
  std::string status;  // as reported (a running run whose process is gone reads aborted)
  std::string suite, started_at, ended_at, git_sha, config_hash, tags, cpu_model, l2_fs_type;
  std::string prefix_cache_start;  // "cold" or "warm" (SuiteConfig::prefix_warm); older runs: "cold"
  std::string board;       // the machine's board, "" where it named none
  std::string device_soc;  // a device run (kvbench run --soc): the profile its measured cases are priced with
  bool git_dirty = false;
  int cores = 0;
  int planned_repetitions = 0;
  double noise_threshold = 0.0;
  bool synthetic = false;  // some model runs on the synthetic backend
  bool sim = false;        // a sim run (its meta_json "sim"): its work counted, its host figures NULL
  Clock timing = Clock::Host;  // which timings the figures are
  std::vector<CaseView> cases;
};

// Throws kv::InputError (file, RUN_ID) for a run the database does not hold. `timing`: the
// host view shows every figure on its own clock; the model view the modelled figures (on the
// model clock) beside the exact ones.
RunView load_run_view(ResultsStore& store, std::int64_t run_id, Clock timing = Clock::Host);

// The view `show` and `run`'s summary print unless told a clock: the host view, except that a
// case that stored no figure of this machine's work (no host, cpu or sim row: a SoC's case of a
// sweep, priced from the host run and never run on that SoC) shows the model view's figures,
// its CaseView::timing Model. When no case holds a measured figure, the model view itself.
RunView load_run_view_measured_or_modelled(ResultsStore& store, std::int64_t run_id);
// Some case of a host view shows modelled timings (load_run_view_measured_or_modelled).
bool mixed_timings(const RunView& run);

}  // namespace kvbench
