# Finds every external dependency once; modules link the imported targets.
find_package(Threads REQUIRED)
find_package(MPI REQUIRED COMPONENTS C)
find_package(Protobuf REQUIRED)
find_package(absl REQUIRED)
# zlib: the IDX reader (runtime/train/idx.cc) reads plain and gzip-compressed files alike.
find_package(ZLIB REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
if(GPIPE_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()

# The CUDA backend (runtime/device/cuda, a later milestone) will be built only where a CUDA
# compiler exists; today every target is CPU code, so the toolkit is only reported.
include(CheckLanguage)
check_language(CUDA)
if(CMAKE_CUDA_COMPILER)
  message(STATUS "gpipe: CUDA toolkit found (${CMAKE_CUDA_COMPILER}); no CUDA targets yet")
endif()
