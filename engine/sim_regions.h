// The sim clock's counted regions. Under Valgrind's callgrind, started with collection off and
// --toggle-collect=kvbench_sim_* (sim/callgrind_tool.h), only what a thread executes inside one
// of these regions' functions is counted, and callgrind attributes it to that function: the
// harness reads a region's instructions and simulated cache misses back from callgrind's output
// as the inclusive cost of its function. Callgrind has no client request that returns a count,
// so a function per region is how counts reach the spans.
//
// The regions are the work spans of the cpu clock (runtime/work_clock.h): a phase's appends,
// attention calls and model compute, on the thread that drives the engine. Collection is
// per thread, so the work must run on that thread: a counted run uses one engine thread, and
// L2 I/O and L0 copies on it (CacheConfig::serial). Outside callgrind a region is one indirect
// call.
#pragma once

#include <cstdint>
#include <string_view>
#include <type_traits>

#include "telemetry.h"

namespace kv::sim {

enum class WorkPart : std::uint8_t { Append, Attend, Model };
inline constexpr int kWorkPartCount = 3;
inline constexpr int kRegionCount = kPhaseCount * kWorkPartCount;

// The callgrind function-name pattern that toggles collection on the regions (and only on them).
inline constexpr std::string_view kRegionPattern = "kvbench_sim_*";

// The function a region's work runs inside: "kvbench_sim_<phase>_<part>"
// (kvbench_sim_decode_attend); index = phase * kWorkPartCount + part.
std::string_view region_symbol(Phase phase, WorkPart part);
std::string_view work_part_name(WorkPart part);  // append, attend, model

// Runs fn() inside the region's function. Regions never nest (callgrind toggles collection on
// each entry and exit: a nested region would turn it off): a nested call is a programmer error.
void run_counted(Phase phase, WorkPart part, void (*fn)(void*), void* context);

template <class F>
void counted(Phase phase, WorkPart part, F&& fn) {
  using Fn = std::remove_reference_t<F>;
  run_counted(phase, part, [](void* f) { (*static_cast<Fn*>(f))(); }, static_cast<void*>(&fn));
}

// True when the process runs under Valgrind (any tool).
bool under_valgrind();
// Under callgrind: drops what has been counted so far (a warm start before the repetition);
// elsewhere nothing.
void discard_counts();
// False when this build has no Valgrind client requests (its headers were missing when it was
// built): under_valgrind() then reads false and discard_counts() does nothing.
bool client_requests_built();

}  // namespace kv::sim
