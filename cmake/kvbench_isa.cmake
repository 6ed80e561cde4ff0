# Runtime-dispatched kernels: each SIMD source is compiled with its own ISA flags and only
# called after a run-time check (CPUID on x86-64, the auxiliary vector on aarch64), so one
# binary runs on any CPU of its architecture.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(KVBENCH_X86 ON)
else()
  set(KVBENCH_X86 OFF)
endif()
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
  set(KVBENCH_ARM64 ON)
else()
  set(KVBENCH_ARM64 OFF)
endif()

set(KVBENCH_AVX2_FLAGS -mavx2 -mfma -mf16c)
# The float kernels use F/BW/VL/DQ; the integer paths use AVX-512BW byte/word dot products, so
# the path does not require VNNI (docs/engine.md, kernel paths).
set(KVBENCH_AVX512_FLAGS -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mfma -mf16c)
# The row kernel of verification (arch/x86/page_kernels_avx512vnni.cpp) is its own unit, called
# only where CPUID reports VNNI.
set(KVBENCH_AVX512VNNI_FLAGS ${KVBENCH_AVX512_FLAGS} -mavx512vnni)

# aarch64: NEON is part of the base architecture; the integer dot products (SDOT, ARMv8.2
# dotprod) and the 8-bit matrix multiply (SMMLA/USMMLA, i8mm) are optional and checked at run
# time from AT_HWCAP / AT_HWCAP2.
set(KVBENCH_DOTPROD_FLAGS -march=armv8.2-a+dotprod)
set(KVBENCH_I8MM_FLAGS -march=armv8.2-a+dotprod+i8mm)
option(KVBENCH_BREAK_NEON_KERNEL "Test-only: build a deliberately wrong NEON kernel (the tests must fail)" OFF)
