# One precompiled header for every C++ target of the build: the standard library, Abseil and
# protobuf headers nearly every source includes, and the generated plan message. Parsing them is
# about a third of a typical source's compile time (measured with GCC 12: 7.0 s -> 4.1 s for
# runtime/schedule/grid.cc), so a fresh build of the main example or of the whole suite takes
# markedly less. The header is compiled once (target gpipe_pch) and every other target reuses it.
#
# GPIPE_PCH (default ON for a top-level build) turns it off. The sanitizer and fuzzer builds
# (scripts/sanitize.sh, scripts/fuzz.sh) build without it, so CI still compiles every source with
# only its own includes: a missing #include cannot hide behind the precompiled header.
option(GPIPE_PCH "Compile every C++ target with one shared precompiled header" ${PROJECT_IS_TOP_LEVEL})

set(GPIPE_PCH_HEADERS
    <algorithm> <cstdint> <functional> <memory> <optional> <span> <string> <utility> <vector>
    [["absl/container/flat_hash_map.h"]] [["absl/status/status.h"]] [["absl/status/statusor.h"]]
    [["absl/strings/str_cat.h"]] [["google/protobuf/message.h"]] [["proto/plan.pb.h"]])

# Creates gpipe_pch; call after gpipe_proto exists and before the targets that reuse it.
function(gpipe_pch_define)
  if(NOT GPIPE_PCH)
    return()
  endif()
  file(WRITE ${PROJECT_BINARY_DIR}/gen/gpipe_pch.cc "// Compiles the shared precompiled header.\n")
  add_library(gpipe_pch STATIC ${PROJECT_BINARY_DIR}/gen/gpipe_pch.cc)
  target_link_libraries(gpipe_pch PRIVATE gpipe_proto absl::flat_hash_map absl::status
                        absl::statusor absl::strings)
  target_precompile_headers(gpipe_pch PRIVATE ${GPIPE_PCH_HEADERS})
  if(CMAKE_CXX_COMPILER_LAUNCHER)
    # Through ccache: the stale header goes before it is rebuilt (cmake/fresh-pch.sh says why),
    # so an unchanged header and every compile that reuses it hit the cache.
    set_target_properties(gpipe_pch PROPERTIES CXX_COMPILER_LAUNCHER
                          "${PROJECT_SOURCE_DIR}/cmake/fresh-pch.sh;${CMAKE_CXX_COMPILER_LAUNCHER}")
  endif()
endfunction()

# Every C++ library and executable under `dir` (recursively) reuses gpipe_pch, but for the ones
# that cannot: gpipe_proto (gpipe_pch needs its generated header), gpipe_pch itself, targets
# without C++ sources, targets with CUDA sources (nvcc does not read GCC's header) and the one
# compiled with OpenMP (gpipe_device_cpu: GCC refuses a header precompiled without it).
function(gpipe_pch_apply dir)
  if(NOT GPIPE_PCH)
    return()
  endif()
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(NOT type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|EXECUTABLE)$" OR
       target MATCHES "^gpipe_(proto|pch)$")
      continue()
    endif()
    get_target_property(sources ${target} SOURCES)
    set(cc_sources ${sources})
    list(FILTER cc_sources INCLUDE REGEX "\\.cc$")
    set(cu_sources ${sources})
    list(FILTER cu_sources INCLUDE REGEX "\\.cu$")
    get_target_property(libraries ${target} LINK_LIBRARIES)
    if(cc_sources AND NOT cu_sources AND NOT "OpenMP::OpenMP_CXX" IN_LIST libraries)
      # The header's own include paths (the generated plan message), not a link dependency.
      target_include_directories(${target} PRIVATE
                                 $<TARGET_PROPERTY:gpipe_proto,INTERFACE_INCLUDE_DIRECTORIES>)
      target_precompile_headers(${target} REUSE_FROM gpipe_pch)
      # Behind the precompiled header GCC 12 inlines std::string's copies differently and reports
      # its known false -Warray-bounds / -Wstringop-overflow / -overread / -Wrestrict on string
      # concatenation (GCC bug 105329 and its duplicates, fixed in 13) in tests that build messages
      # from literals. Off for the tests' targets only; the library code keeps the checks, and so
      # do the clang builds (no precompiled header).
      get_target_property(source_dir ${target} SOURCE_DIR)
      if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13 AND
         source_dir MATCHES "^${PROJECT_SOURCE_DIR}/tests(/|$)")
        target_compile_options(${target} PRIVATE -Wno-array-bounds -Wno-stringop-overflow
                                                 -Wno-stringop-overread -Wno-restrict)
      endif()
    endif()
  endforeach()
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(subdir IN LISTS subdirs)
    gpipe_pch_apply(${subdir})
  endforeach()
endfunction()
