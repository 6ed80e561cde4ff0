// How many threads a pool may start. More threads than cores only wait for one another (a pool's
// workers poll for a moment before they sleep, so a crowd of them spins where one would work),
// and a mistyped count (100000) would start threads until the machine cannot fork. A pool is
// refused past twice the machine's hardware threads unless KVBENCH_MAX_THREADS raises the limit.
#pragma once

#include <string>

namespace kv {

// The hard ceiling whatever the override says: a pool of this many is already a mistake.
inline constexpr long kMaxThreadsEver = 4096;

// The machine's hardware threads (at least 1).
int hardware_threads();

// 2 x hardware_threads(), or KVBENCH_MAX_THREADS when it is set (a whole number in
// 1..kMaxThreadsEver; anything else is an InputError naming the variable).
int max_pool_threads();

// Why `requested` threads (0 = one per hardware thread) cannot start, or "" when they can.
std::string thread_count_problem(long requested);

// Throws InputError(where, field, ...) with thread_count_problem's reason.
void check_thread_count(long requested, const std::string& where, const std::string& field);

}  // namespace kv
