# Dense layers (engine/model/dense.cpp) multiply through Debian's pthread OpenBLAS
# (libopenblas-pthread-dev), linked statically: the binary then carries that build whichever
# flavour update-alternatives has made the system's libopenblas.so.0. It is used with one
# thread per call (engine/model/dense.h says why not the serial build). The static library
# needs no Fortran runtime for the level-2/3 calls kvbench makes. Cross builds find the target's
# package through multiarch (ci/install-deps.sh installs libopenblas-pthread-dev:arm64).
set(kvbench_blas_arch "${CMAKE_LIBRARY_ARCHITECTURE}")
if(NOT kvbench_blas_arch AND CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
  set(kvbench_blas_arch aarch64-linux-gnu)
endif()
find_path(KVBENCH_OPENBLAS_PTHREAD_INCLUDE cblas.h PATHS /usr/include/${kvbench_blas_arch}/openblas-pthread
          NO_DEFAULT_PATH NO_CMAKE_FIND_ROOT_PATH)
find_library(KVBENCH_OPENBLAS_PTHREAD_LIBRARY NAMES libopenblas.a PATHS /usr/lib/${kvbench_blas_arch}/openblas-pthread
             NO_DEFAULT_PATH NO_CMAKE_FIND_ROOT_PATH)
if(NOT KVBENCH_OPENBLAS_PTHREAD_INCLUDE OR NOT KVBENCH_OPENBLAS_PTHREAD_LIBRARY)
  message(FATAL_ERROR "kvbench needs Debian's pthread OpenBLAS for ${kvbench_blas_arch}: "
                      "/usr/include/${kvbench_blas_arch}/openblas-pthread/cblas.h and "
                      "/usr/lib/${kvbench_blas_arch}/openblas-pthread/libopenblas.a not found; "
                      "run ci/install-deps.sh as root (package libopenblas-pthread-dev)")
endif()
add_library(kvbench_openblas INTERFACE)
target_include_directories(kvbench_openblas SYSTEM INTERFACE ${KVBENCH_OPENBLAS_PTHREAD_INCLUDE})
find_package(Threads REQUIRED)
target_link_libraries(kvbench_openblas INTERFACE ${KVBENCH_OPENBLAS_PTHREAD_LIBRARY} Threads::Threads m)
