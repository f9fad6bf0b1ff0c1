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
# OpenMP runtime carries the compute threads. DNNL::dnnl, CUDNN::cudnn and NCCL::nccl come from
# cmake/GpipeImportedLibraries.cmake, which the installed package's gpipeConfig.cmake uses too.
include(${CMAKE_CURRENT_LIST_DIR}/GpipeImportedLibraries.cmake)
gpipe_import_dnnl(GPIPE_DNNL_FOUND)
if(NOT GPIPE_DNNL_FOUND)
  message(FATAL_ERROR "gpipe: oneDNN not found (libdnnl and oneapi/dnnl/dnnl.hpp; "
                      "scripts/setup.sh installs libdnnl-dev, or set GPIPE_DNNL_LIBRARY and "
                      "GPIPE_DNNL_INCLUDE_DIR)")
endif()
find_package(OpenMP REQUIRED COMPONENTS CXX)
if(GPIPE_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()

# The CUDA backend (runtime/device/cuda, runtime/backend/cuda) is built wherever a CUDA compiler
# exists (GPIPE_CUDA=OFF turns it off); without one every other target still builds and tests.
# GPIPE_HAVE_CUDA tells the CMake lists which variant to build; C++ sources never ask.
option(GPIPE_CUDA "Build the CUDA backend when a CUDA compiler is found" ON)
set(GPIPE_CUDA_ARCHITECTURES "90;80" CACHE STRING
    "GPU architectures the CUDA backend is compiled for (CMAKE_CUDA_ARCHITECTURES syntax)")
set(GPIPE_HAVE_CUDA OFF)
set(GPIPE_HAVE_NCCL OFF)
set(GPIPE_HAVE_CUDNN_FRONTEND OFF)
if(GPIPE_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_ARCHITECTURES "${GPIPE_CUDA_ARCHITECTURES}")
    enable_language(CUDA)
    # The kernels include the runtime's C++20 headers. CMake 3.25 does not know how nvcc 13
    # enables C++20, so it is told (the targets' C++20 requirement then maps onto CUDA sources).
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    string(APPEND CMAKE_CUDA_FLAGS " --expt-relaxed-constexpr")
    # Debian's packages export /usr/include as an include directory; passed to nvcc as -isystem it
    # breaks libstdc++'s #include_next <math.h>. It is searched anyway, so it is left out.
    list(APPEND CMAKE_CUDA_IMPLICIT_INCLUDE_DIRECTORIES /usr/include)
    # No fused multiply-add contraction: the element-wise kernels then round exactly as the CPU
    # reference (GCC in ISO mode does not contract either), so optimizer updates and the like
    # agree to the bit.
    string(APPEND CMAKE_CUDA_FLAGS " --fmad=false")
    find_package(CUDAToolkit REQUIRED)
    # cuDNN 9 ships no CMake package: found beside the toolkit (or where CUDNN_ROOT points).
    gpipe_import_cudnn(GPIPE_CUDNN_FOUND)
    if(NOT GPIPE_CUDNN_FOUND)
      message(FATAL_ERROR "gpipe: cuDNN not found beside the CUDA toolkit (set CUDNN_ROOT, or "
                          "-DGPIPE_CUDA=OFF to build without the CUDA backend)")
    endif()
    # NCCL (runtime.transport: NCCL) ships beside the toolkit or in its own prefix (NCCL_ROOT).
    # Without it the CUDA backend is built with the MPI transport only.
    gpipe_import_nccl(GPIPE_NCCL_FOUND)
    if(GPIPE_NCCL_FOUND)
      set(GPIPE_HAVE_NCCL ON)
    else()
      message(STATUS "gpipe: NCCL not found (set NCCL_ROOT); runtime.transport NCCL is not built")
    endif()
    # cudnn-frontend 1.x (NVIDIA's header-only graph API over cuDNN; scripts/cudnn_frontend.sh
    # installs the pinned version, or set CUDNN_FRONTEND_ROOT): runtime.cuda.cudnn_attention,
    # the fused attention on cuDNN. Without it that option is refused and all else is built.
    find_path(GPIPE_CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h
              HINTS ${CUDNN_FRONTEND_ROOT} ENV CUDNN_FRONTEND_ROOT PATH_SUFFIXES include)
    if(GPIPE_CUDNN_FRONTEND_INCLUDE_DIR)
      file(STRINGS "${GPIPE_CUDNN_FRONTEND_INCLUDE_DIR}/cudnn_frontend_version.h" fe_version_lines
           REGEX "define CUDNN_FRONTEND_(MAJOR|MINOR)_VERSION")
      string(REGEX REPLACE ".*MAJOR_VERSION ([0-9]+).*MINOR_VERSION ([0-9]+).*" "\\1.\\2"
             GPIPE_CUDNN_FRONTEND_VERSION "${fe_version_lines}")
      if(GPIPE_CUDNN_FRONTEND_VERSION VERSION_GREATER_EQUAL 1.32)
        set(GPIPE_HAVE_CUDNN_FRONTEND ON)
        message(STATUS "gpipe: cudnn-frontend ${GPIPE_CUDNN_FRONTEND_VERSION} "
                       "(${GPIPE_CUDNN_FRONTEND_INCLUDE_DIR})")
      else()
        message(STATUS "gpipe: cudnn-frontend ${GPIPE_CUDNN_FRONTEND_VERSION} is older than "
                       "1.32; runtime.cuda.cudnn_attention is not built (scripts/cudnn_frontend.sh)")
      endif()
    else()
      message(STATUS "gpipe: cudnn-frontend not found (scripts/cudnn_frontend.sh installs it); "
                     "runtime.cuda.cudnn_attention is not built")
    endif()
    set(GPIPE_HAVE_CUDA ON)
    message(STATUS "gpipe: CUDA backend on (${CMAKE_CUDA_COMPILER}, CUDA "
                   "${CUDAToolkit_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
  else()
    message(STATUS "gpipe: no CUDA compiler found; the CUDA backend is not built")
  endif()
endif()
