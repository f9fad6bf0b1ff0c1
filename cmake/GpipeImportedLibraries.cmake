# The native libraries that ship no usable CMake package, found by library and header and made
# into imported targets: DNNL::dnnl, CUDNN::cudnn, NCCL::nccl. Used by gpipe's own build
# (cmake/GpipeDependencies.cmake) and installed beside gpipeConfig.cmake, which calls the same
# functions, so a consumer of the installed package finds them the way gpipe did.
#
# Each gpipe_import_<name>(<result_var>) sets <result_var> to TRUE when the target exists (made
# now or earlier in this directory scope), FALSE otherwise; it never fails the configure, so the
# caller decides between an error and a missing feature. The found paths are cache variables
# (GPIPE_<NAME>_LIBRARY, GPIPE_<NAME>_INCLUDE_DIR), overridable on the command line.

# gpipe_import_library(<target> <prefix> <result_var> LIBRARY <name> HEADER <file>
#                      [HINTS <dir>...])
function(gpipe_import_library target prefix result_var)
  cmake_parse_arguments(L "" "LIBRARY;HEADER" "HINTS" ${ARGN})
  if(TARGET ${target})
    set(${result_var} TRUE PARENT_SCOPE)
    return()
  endif()
  find_library(${prefix}_LIBRARY NAMES ${L_LIBRARY} HINTS ${L_HINTS} PATH_SUFFIXES lib lib64)
  find_path(${prefix}_INCLUDE_DIR NAMES ${L_HEADER} HINTS ${L_HINTS} PATH_SUFFIXES include)
  if(NOT ${prefix}_LIBRARY OR NOT ${prefix}_INCLUDE_DIR)
    set(${result_var} FALSE PARENT_SCOPE)
    return()
  endif()
  add_library(${target} UNKNOWN IMPORTED)
  set_target_properties(${target} PROPERTIES IMPORTED_LOCATION "${${prefix}_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${${prefix}_INCLUDE_DIR}")
  set(${result_var} TRUE PARENT_SCOPE)
endfunction()

# oneDNN (Debian's libdnnl-dev): the CPU backend's matmul and convolution primitives. Its CMake
# package also demands OpenCL for a GPU runtime gpipe does not use, so it is found directly.
function(gpipe_import_dnnl result_var)
  gpipe_import_library(DNNL::dnnl GPIPE_DNNL found LIBRARY dnnl HEADER oneapi/dnnl/dnnl.hpp)
  set(${result_var} ${found} PARENT_SCOPE)
endfunction()

# cuDNN 9 ships no CMake package: found beside the CUDA toolkit (find_package(CUDAToolkit) first)
# or where CUDNN_ROOT points.
function(gpipe_import_cudnn result_var)
  gpipe_import_library(CUDNN::cudnn GPIPE_CUDNN found LIBRARY cudnn HEADER cudnn.h
                       HINTS ${CUDNN_ROOT} ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
                             ${CUDAToolkit_INCLUDE_DIRS})
  set(${result_var} ${found} PARENT_SCOPE)
endfunction()

# NCCL ships beside the CUDA toolkit or in its own prefix (NCCL_ROOT).
function(gpipe_import_nccl result_var)
  gpipe_import_library(NCCL::nccl GPIPE_NCCL found LIBRARY nccl HEADER nccl.h
                       HINTS ${NCCL_ROOT} ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
                             ${CUDAToolkit_INCLUDE_DIRS})
  set(${result_var} ${found} PARENT_SCOPE)
endfunction()
