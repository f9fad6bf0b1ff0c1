# Finds every external dependency once; modules link the imported targets.
find_package(Threads REQUIRED)
find_package(MPI REQUIRED COMPONENTS C)
find_package(Protobuf REQUIRED)
find_package(absl REQUIRED)
# zlib: the IDX reader (runtime/train/idx.cc) reads plain and gzip-compressed files alike.
find_package(ZLIB REQUIRED)
# nlohmann-json (Debian's nlohmann-json3-dev, header-only): every JSON gpipe reads or writes.
find_package(nlohmann_json 3.11 REQUIRED)
# oneDNN (Debian's libdnnl-dev): the CPU backend's matmul and convolution primitives; its
# OpenMP runtime carries the compute threads.
# (Its CMake package also demands OpenCL for a GPU runtime gpipe does not use, so the library
# and header are found directly.)
find_library(GPIPE_DNNL_LIBRARY NAMES dnnl REQUIRED)
find_path(GPIPE_DNNL_INCLUDE_DIR NAMES oneapi/dnnl/dnnl.hpp REQUIRED)
add_library(DNNL::dnnl UNKNOWN IMPORTED)
set_target_properties(DNNL::dnnl PROPERTIES IMPORTED_LOCATION "${GPIPE_DNNL_LIBRARY}"
                      INTERFACE_INCLUDE_DIRECTORIES "${GPIPE_DNNL_INCLUDE_DIR}")
find_package(OpenMP REQUIRED COMPONENTS CXX)
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
