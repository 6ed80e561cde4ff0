#include "runtime/isa.h"

#include "runtime/error.h"

#if defined(__x86_64__)
#include <cpuid.h>
#elif defined(__aarch64__)
#include <sys/auxv.h>
#endif

namespace kv {

namespace {
#if defined(__x86_64__)
// F16C is CPUID.1:ECX bit 29 (clang 14's __builtin_cpu_supports does not know "f16c"). Read
// once: CPUID traps to the hypervisor on a VM (microseconds), and kernel lookups ask per call.
bool has_f16c() {
  static const bool f16c = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
  }();
  return f16c;
}
#elif defined(__aarch64__)
// The kernel's hardware capability bits (Linux arch/arm64/include/uapi/asm/hwcap.h), read once.
constexpr unsigned long kHwcapAsimd = 1ul << 1;
constexpr unsigned long kHwcapAsimdDp = 1ul << 20;
constexpr unsigned long kHwcap2I8mm = 1ul << 13;
unsigned long hwcap() {
  static const unsigned long bits = getauxval(AT_HWCAP);
  return bits;
}
unsigned long hwcap2() {
  static const unsigned long bits = getauxval(AT_HWCAP2);
  return bits;
}
#endif
}  // namespace

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::Auto: return "auto";
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
    case Isa::Neon: return "neon";
    case Isa::Dotprod: return "dotprod";
    case Isa::I8mm: return "i8mm";
  }
  return "unknown";
}

Isa parse_isa(std::string_view token, std::string_view where) {
  for (Isa isa : kAllIsas) {
    if (token == isa_name(isa)) return isa;
  }
  throw InputError(std::string(where), "isa",
                   "unknown ISA '" + std::string(token) +
                       "' (expected auto, scalar, avx2, avx512, neon, dotprod or i8mm)");
}

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::Auto:
    case Isa::Scalar: return true;
#if defined(__x86_64__)
    case Isa::Avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
    case Isa::Avx512:
#if !defined(KV_HAVE_AVX512_KERNELS)
      return false;
#endif
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("fma") && has_f16c();
    default: return false;
#elif defined(__aarch64__) && defined(KV_HAVE_ARM_KERNELS)
    case Isa::Neon: return (hwcap() & kHwcapAsimd) != 0;
    case Isa::Dotprod: return (hwcap() & kHwcapAsimd) != 0 && (hwcap() & kHwcapAsimdDp) != 0;
    case Isa::I8mm: return isa_supported(Isa::Dotprod) && (hwcap2() & kHwcap2I8mm) != 0;
    default: return false;
#else
    default: return false;
#endif
  }
  return false;
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::Scalar, Isa::Neon, Isa::Dotprod, Isa::I8mm, Isa::Avx2, Isa::Avx512}) {
    if (isa_supported(isa)) isas.push_back(isa);
  }
  return isas;
}

Isa best_isa() { return supported_isas().back(); }

Isa resolve_isa(Isa requested) {
  if (requested == Isa::Auto) return best_isa();
  if (!isa_supported(requested)) {
    throw InputError("isa", std::string(isa_name(requested)), "this CPU or build does not support that kernel path");
  }
  return requested;
}

}  // namespace kv
