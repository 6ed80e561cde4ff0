// Instruction-set paths of the kernels, chosen at run time (CPUID on x86-64, AT_HWCAP and
// AT_HWCAP2 on aarch64: one binary runs on any CPU of its architecture) and recorded in
// telemetry so every figure says which path produced it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kv {

// Neon: Advanced SIMD (every aarch64 CPU). Dotprod: Neon plus SDOT/UDOT (ARMv8.2 dotprod) for
// the integer paths. I8mm: Dotprod plus SMMLA/USMMLA/USDOT (8-bit matrix multiply).
enum class Isa { Auto, Scalar, Avx2, Avx512, Neon, Dotprod, I8mm };

// Every path, in the order names are listed.
inline constexpr Isa kAllIsas[] = {Isa::Auto, Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Neon, Isa::Dotprod, Isa::I8mm};

std::string_view isa_name(Isa isa);
// Parses a name of isa_name (auto, scalar, avx2, avx512, neon, dotprod, i8mm); throws InputError naming `where`.
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
