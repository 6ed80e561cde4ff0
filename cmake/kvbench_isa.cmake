# Runtime-dispatched kernels: each SIMD source is compiled with its own ISA flags and only
# called after a CPUID check, so one binary runs on any x86-64.
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
# VNNI is not required (docs/engine.md, kernel paths).
set(KVBENCH_AVX512_FLAGS -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mfma -mf16c)
