#include "case_group_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "degradation.h"
#include "device_conditions.h"
#include "engine_run.h"
#include "executor.h"
#include "human_units.h"
#include "soc_plan.h"

namespace kvbench {

namespace {

double work_of(const PreparedCase& c) { return static_cast<double>(std::max(c.script.script.positions, 1)); }

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// One SoC's case of a group.
struct Member {
  const PreparedCase* c = nullptr;
  int index = 0;  // 1-based, for the progress lines
  std::int64_t id = 0;
  Pricing how;
  Capacities capacities;
  bool decided = false;   // whether it reruns is known
  double engine_s = 0.0;  // wall time of the engine runs that are its own
  bool failed = false;
  bool finished = false;  // stored as complete
  bool degraded = false;
};

class GroupRun {
 public:
  GroupRun(SuiteRun& run, const std::vector<PreparedCase>& cases, std::size_t begin, std::size_t end)
      : run_(run), c_(cases[begin]), started_(std::chrono::steady_clock::now()) {
    group_planned_ = work_of(c_) * units();
    for (std::size_t i = begin; i < end; ++i) add_member(cases[i], static_cast<int>(i) + 1);
  }

  void execute() {
    if (!c_.script.skipped.empty()) return skip();
    note_weights();
    host_l2_ = l2_dir(c_.policy->cache.memory.l1_bytes > 0);
    host_context_ = {run_.suite.seed, run_.suite.noise_threshold, &host_l2_, run_.options.l2_io, run_.options.stop, nullptr,
                     run_.suite.prefix_warm, run_.suite.device.max_start_temp_c};
    for (const Member& m : members_) group_planned_ += predicted(m) ? work_of(c_) * run_.repetitions : 0.0;  // already in the total
    try {
      for (int r = 1 - run_.warmup; r <= run_.repetitions; ++r) repetition(r);
      finish();
    } catch (const ExecutionStopped&) {
      run_.summary.interrupted = true;
      fail_all("interrupted");
    } catch (const DatabaseError& e) {
      store_failed(e);
      throw;
    } catch (const std::exception& e) {
      // A case that fails is recorded with its error; the others still run.
      run_.progress.clear();
      fmt::print(stderr, "kvbench: case {} failed: {}\n", c_.info.name(), e.what());
      fail_all(e.what());
    }
    // What of the group's planned work did not run leaves the ETA.
    if (group_planned_ > group_done_) run_.progress.skip(group_planned_ - group_done_);
  }

 private:
  int units() const { return run_.repetitions + run_.warmup; }
  bool stopped() const { return run_.options.stop != nullptr && run_.options.stop->load(); }
  bool predicted(const Member& m) const { return run_.plan.expected_rerun[static_cast<std::size_t>(m.index - 1)] != 0; }
  std::string l2_dir(bool capped) { return capped ? run_.workspace.run_dir(c_.policy->cache.memory.l2.dir) : ""; }

  void add_member(const PreparedCase& c, int index) {
    Member m;
    m.c = &c;
    m.index = index;
    m.id = run_.store.add_case(run_.summary.run_id, c.info);
    m.how.profile = &run_.profiles.at(c.info.soc);
    m.how.host_case = c.info.soc == "host";
    m.decided = m.how.host_case;  // the host's case is the host run itself
    if (!c.pinned_only.empty()) m.how.notes.push_back(note_event(EventKind::PinnedOnly, c.pinned_only));
    ++run_.summary.cases;
    members_.push_back(std::move(m));
  }

  // The host run's time is the host case's, where the SoCs include the host.
  Member& host_member() {
    for (Member& m : members_) {
      if (m.how.host_case) return m;
    }
    return no_host_case_;
  }

  void skip() {
    for (const Member& m : members_) {
      ++run_.summary.skipped;
      run_.summary.lines.push_back({m.c->info.name(), "skipped", c_.script.skipped});
      run_.progress.case_done(m.index, m.c->info.name(), "skipped", "");
    }
    run_.progress.skip(work_of(c_) * units());
  }

  // A SoC whose budget cannot hold the weights is priced from the host run as it is.
  void note_weights() {
    weights_ = static_cast<double>(model_work_of(*c_.model).resident_bytes);
    floor_bytes_ = l1_floor(c_).whole_bytes;
    for (Member& m : members_) {
      if (holds_weights(*m.how.profile, weights_)) continue;
      m.decided = true;
      m.how.notes.push_back(weights_do_not_fit(*m.how.profile, weights_));
    }
  }

  // One engine run, timed for the progress lines and its case's time.
  EngineRun timed_run(Member& owner, const RepetitionContext& context, int repetition) {
    const auto started = std::chrono::steady_clock::now();
    EngineRun engine_run = run_.sim != nullptr ? run_engine_sim(c_, context, repetition, *run_.sim) : run_engine(c_, context, repetition);
    const double took = seconds_since(started);
    owner.engine_s += took;
    group_done_ += work_of(c_);
    run_.progress.done(work_of(c_));
    run_.progress.repetition_done(took);
    return engine_run;
  }

  // Whether each SoC reruns is decided from the first host run's actual peak L1; its own runs
  // join the ETA, or leave it, where the plan guessed wrong.
  void decide(const EngineRun& host_run) {
    for (Member& m : members_) {
      if (m.decided) continue;
      m.decided = true;
      SocPlan plan = plan_soc(*m.how.profile, weights_, host_run.peak_l1_bytes, c_.policy->cache.memory, floor_bytes_);
      m.capacities = plan.capacities;
      m.how.rerun = plan.rerun;
      if (plan.note) m.how.notes.push_back(std::move(*plan.note));
      const double own = work_of(c_) * run_.repetitions;
      if (plan.rerun && !predicted(m)) {
        group_planned_ += own;
        run_.progress.add(own);
      }
      if (!plan.rerun && predicted(m)) {
        group_planned_ -= own;
        run_.progress.skip(own);
      }
    }
  }

  void repetition(int r) {
    if (stopped()) throw ExecutionStopped();
    cool_down(r);
    run_.progress.start(members_.front().index, c_.info.name(),
                        r < 1 ? "warmup" : fmt::format("repetition {}/{}", r, run_.repetitions), work_of(c_));
    const EngineRun host_run = timed_run(host_member(), host_context_, std::max(r, 1));
    decide(host_run);
    if (r < 1) return;  // warmup: not stored
    for (Member& m : members_) {
      if (m.failed) continue;
      PricedRepetition rep;
      if (m.how.rerun) {
        if (!own_run(m, r, rep)) continue;
      } else {
        rep = priced_repetition(host_run, m.how);
      }
      m.degraded = m.degraded || rep.degraded;
      run_.store.add_repetition(m.id, rep.record);
      ++run_.summary.stored_repetitions;
    }
    run_.store.heartbeat(run_.summary.run_id);
  }

  // device.max_start_temp_c: a repetition starts on a cool device, or says that it did not
  // (and its figures are flagged noisy, Measurement).
  void cool_down(int r) {
    const DeviceGate& gate = run_.suite.device;
    if (!gate.max_start_temp_c) return;
    const std::string root = sysfs_root();
    const std::vector<int> cpus = engine_cpus();
    const std::string which = fmt::format("{} {}", c_.info.name(), r < 1 ? "warmup" : fmt::format("repetition {}", r));
    bool said = false;
    const CoolWait wait = wait_until_cool(
        *gate.max_start_temp_c, gate.cool_timeout_s, [&] { return sample_device(root, cpus).hottest_c; },
        [&](double seconds) {
          if (!said) {
            run_.progress.clear();
            fmt::print(stderr, "kvbench: {} waits for the device to cool below {} C (device.max_start_temp_c; at most {} s)\n", which,
                       *gate.max_start_temp_c, gate.cool_timeout_s);
            said = true;
          }
          std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
          if (stopped()) throw ExecutionStopped();
        });
    if (!wait.timed_out) return;
    run_.progress.clear();
    fmt::print(stderr, "kvbench: {}: the hottest thermal zone is still {:.1f} C after waiting {:.0f} s (device.max_start_temp_c {} C); it runs now and is flagged noisy\n",
               which, wait.hottest_c.value_or(0.0), wait.waited_s, *gate.max_start_temp_c);
  }

  // A SoC's own run with its capacities; false when it failed (which fails its case only).
  bool own_run(Member& m, int r, PricedRepetition& rep) {
    if (stopped()) throw ExecutionStopped();
    run_.progress.start(m.index, m.c->info.name(),
                        fmt::format("repetition {}/{} with {}'s capacities", r, run_.repetitions, m.c->info.soc), work_of(c_));
    try {
      const std::string own_l2 = l2_dir(m.capacities.l1_bytes > 0 || c_.policy->cache.memory.l1_bytes > 0);
      RepetitionContext own = host_context_;
      own.l2_dir = &own_l2;
      own.capacities = &m.capacities;
      rep = priced_repetition(timed_run(m, own, r), m.how);
      return true;
    } catch (const ExecutionStopped&) {
      throw;
    } catch (const DatabaseError&) {
      throw;  // the store, not the case: the run stops
    } catch (const std::exception& e) {
      run_.progress.clear();
      fmt::print(stderr, "kvbench: case {} failed: {}\n", m.c->info.name(), e.what());
      fail(m, e.what());
      return false;
    }
  }

  void finish() {
    for (Member& m : members_) {
      if (m.failed) continue;
      run_.store.finish_case(m.id, CaseStatus::Complete);
      m.finished = true;
      run_.summary.lines.push_back({m.c->info.name(), "complete", ""});
      run_.summary.degraded += m.degraded ? 1 : 0;
      const bool own_runs = m.how.host_case || m.how.rerun;
      run_.progress.case_done(m.index, m.c->info.name(), m.degraded ? "complete (degraded)" : "complete",
                              own_runs ? " in " + human_duration_ms(m.engine_s * 1e3) : ", priced from the host run");
    }
  }

  void fail(Member& m, const std::string& error) {
    m.failed = true;
    run_.store.finish_case(m.id, CaseStatus::Failed, error);
    ++run_.summary.failed;
    run_.summary.lines.push_back({m.c->info.name(), "failed", error});
    run_.progress.case_done(m.index, m.c->info.name(), error == "interrupted" ? "interrupted" : "failed",
                            " after " + human_duration_ms(seconds_since(started_) * 1e3));
  }

  void fail_all(const std::string& error) {
    for (Member& m : members_) {
      if (!m.failed && !m.finished) fail(m, error);
    }
  }

  // The store, not the case: the run stops. Its cases in flight say why where the file still
  // takes it (an update in place often fits where new rows do not).
  void store_failed(const DatabaseError& e) {
    const std::string why = "the results database could not be written: " + e.reason();
    for (Member& m : members_) {
      if (m.failed || m.finished) continue;
      try {
        run_.store.finish_case(m.id, CaseStatus::Failed, why);
      } catch (const std::exception&) {
      }
    }
  }

  SuiteRun& run_;
  const PreparedCase& c_;
  const std::chrono::steady_clock::time_point started_;
  std::vector<Member> members_;
  Member no_host_case_;
  double group_planned_ = 0.0, group_done_ = 0.0;  // the group's planned work and what of it ran
  double weights_ = 0.0;
  std::uint64_t floor_bytes_ = 0;
  std::string host_l2_;
  RepetitionContext host_context_;
};

}  // namespace

WorkPlan plan_work(const std::vector<PreparedCase>& cases, const std::vector<std::pair<std::size_t, std::size_t>>& groups,
                   const SocProfiles& profiles, int repetitions, int warmup) {
  WorkPlan plan;
  plan.expected_rerun.assign(cases.size(), 0);
  plan.host_work.assign(groups.size(), 0.0);
  plan.own_work.assign(groups.size(), 0.0);
  const int units = repetitions + warmup;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const auto [begin, end] = groups[g];
    const PreparedCase& c = cases[begin];
    if (!c.script.skipped.empty()) continue;
    plan.host_work[g] = work_of(c) * units;
    plan.engine_runs += units;
    const auto weights = static_cast<double>(model_work_of(*c.model).resident_bytes);
    const double peak = expected_peak_l1(c);
    const std::uint64_t floor = l1_floor(c).whole_bytes;
    for (std::size_t i = begin; i < end; ++i) {
      const kv::soc::SocProfile& p = profiles.at(cases[i].info.soc);
      if (cases[i].info.soc == "host" || !holds_weights(p, weights)) continue;
      if (!plan_soc(p, weights, peak, c.policy->cache.memory, floor).rerun) continue;
      plan.expected_rerun[i] = 1;
      plan.own_work[g] += work_of(c) * repetitions;
      plan.soc_runs += repetitions;
    }
    plan.work += plan.host_work[g] + plan.own_work[g];
  }
  return plan;
}

void run_case_group(SuiteRun& run, const std::vector<PreparedCase>& cases, std::size_t begin, std::size_t end) {
  GroupRun(run, cases, begin, end).execute();
}

}  // namespace kvbench
