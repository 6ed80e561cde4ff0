// Instruction-set paths of the kernels, chosen at run time from CPUID (one binary runs on any
// x86-64) and recorded in telemetry so every figure says which path produced it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kv {

enum class Isa { Auto, Scalar, Avx2, Avx512, Neon };

std::string_view isa_name(Isa isa);
// Parses "auto", "scalar", "avx2", "avx512", "neon"; throws InputError naming `where`.
Isa parse_isa(std::string_view token, std::string_view where);

// True when this CPU (and this build) can run the path.
bool isa_supported(Isa isa);
// The fastest supported path.
Isa best_isa();
// Auto resolves to best_isa(); an explicit but unsupported path is an InputError.
Isa resolve_isa(Isa requested);
// Every concrete path this machine can run, slowest first (tests iterate over these).
std::vector<Isa> supported_isas();

}  // namespace kv
