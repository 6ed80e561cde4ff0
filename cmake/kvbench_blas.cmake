# Dense layers (engine/model/dense.cpp) multiply through Debian's serial OpenBLAS
# (libopenblas-serial-dev), linked statically: the binary then carries the serial build
# whichever flavour update-alternatives has made the system's libopenblas.so.0
# (engine/model/dense.h says why serial). The static library needs no Fortran runtime for the
# level-2/3 calls kvbench makes. Cross builds find the target's package through multiarch
# (ci/install-deps.sh installs libopenblas-serial-dev:arm64).
set(kvbench_blas_arch "${CMAKE_LIBRARY_ARCHITECTURE}")
if(NOT kvbench_blas_arch AND CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
  set(kvbench_blas_arch aarch64-linux-gnu)
endif()
find_path(KVBENCH_CBLAS_INCLUDE cblas.h PATHS /usr/include/${kvbench_blas_arch}/openblas-serial
          NO_DEFAULT_PATH NO_CMAKE_FIND_ROOT_PATH)
find_library(KVBENCH_OPENBLAS_LIBRARY NAMES libopenblas.a PATHS /usr/lib/${kvbench_blas_arch}/openblas-serial
             NO_DEFAULT_PATH NO_CMAKE_FIND_ROOT_PATH)
if(NOT KVBENCH_CBLAS_INCLUDE OR NOT KVBENCH_OPENBLAS_LIBRARY)
  message(FATAL_ERROR "kvbench needs Debian's serial OpenBLAS for ${kvbench_blas_arch}: "
                      "/usr/include/${kvbench_blas_arch}/openblas-serial/cblas.h and "
                      "/usr/lib/${kvbench_blas_arch}/openblas-serial/libopenblas.a not found; "
                      "run ci/install-deps.sh as root (package libopenblas-serial-dev)")
endif()
add_library(kvbench_openblas INTERFACE)
target_include_directories(kvbench_openblas SYSTEM INTERFACE ${KVBENCH_CBLAS_INCLUDE})
find_package(Threads REQUIRED)
target_link_libraries(kvbench_openblas INTERFACE ${KVBENCH_OPENBLAS_LIBRARY} Threads::Threads m)
