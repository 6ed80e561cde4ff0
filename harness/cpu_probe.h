// How fast the machine's cores ran, as CPU time: a fixed reference job timed on thread CPU
// clocks. Waiting for a core does not lengthen CPU time, but a busy neighbour still can: a
// sibling hardware thread on the same physical core, shared caches and memory bandwidth, or a
// hypervisor's steal that the guest charges to the running thread. The probe grows with those
// as the engine's CPU time does, so a comparison between a quiet and a busy run can take the
// cores' own slowdown out of the engine's CPU-time figures (baselines/comparison.h).
#pragma once

#include <cstdint>
#include <vector>

namespace kvbench {

// Runs the reference job once on each of `threads` threads at the same time (as the engine's
// pool would run) and returns the mean CPU time of one job, ms. The job is the same in every
// build: integer mixing over a 256 KiB buffer, stores included, about 5 ms on a current core.
double cpu_probe_ms(int threads);

// The reference job itself on the calling thread: `rounds` passes over `buffer` (filled by
// cpu_probe_buffer, outside the timed part: its page faults are no work of the job). Returns a
// checksum that depends on every pass, so that no pass can be left out.
std::vector<std::uint64_t> cpu_probe_buffer();
std::uint64_t cpu_probe_job(std::vector<std::uint64_t>& buffer, int rounds);

}  // namespace kvbench
