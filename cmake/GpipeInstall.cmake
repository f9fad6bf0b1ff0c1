# Installing gpipe as a CMake package, and the namespaced names it is used by (docs/embedding.md,
# "Installing and using gpipe from CMake"). Consumers link gpipe::<name> whether they
# find_package(gpipe) an installed tree or add_subdirectory() the sources.
#
#   gpipe_export_library(<target> [EXPORT_NAME <name>])
#     Call next to the add_library of every library that gpipe_api or a program links, directly
#     or through other libraries. Makes the alias gpipe::<name> (<name>: the target's name without
#     its gpipe_ prefix unless given), requires C++20 of consumers (the headers need it), adds the
#     installed include directories, and puts the target in the gpipeTargets export set.
#   gpipe_check_exported(<target>...)
#     Fails the configure, naming the library and who links it, when one of the given targets
#     links (transitively) a gpipe library that was not passed to gpipe_export_library; without
#     this check the mistake would surface only as CMake's generate-time "requires target ... that
#     is not in any export set", and only with GPIPE_INSTALL=ON.
#   gpipe_install_package()
#     The headers (include/gpipe/*.h and the generated version.h into <prefix>/include/gpipe/;
#     the internal headers they include, by their source paths, into
#     <prefix>/include/gpipe/internal/), gpipeTargets.cmake, gpipeConfig.cmake and
#     gpipeConfigVersion.cmake into <prefix>/lib/cmake/gpipe/.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(GPIPE_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/gpipe)
set(GPIPE_INSTALL_INTERNAL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/gpipe/internal)

function(gpipe_export_library target)
  cmake_parse_arguments(E "" "EXPORT_NAME" "" ${ARGN})
  if(NOT E_EXPORT_NAME)
    string(REGEX REPLACE "^gpipe_" "" E_EXPORT_NAME "${target}")
  endif()
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${E_EXPORT_NAME})
  add_library(gpipe::${E_EXPORT_NAME} ALIAS ${target})
  # Installed, the internal headers keep their source paths under include/gpipe/internal/.
  target_include_directories(${target} INTERFACE
                             $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
                             $<INSTALL_INTERFACE:${GPIPE_INSTALL_INTERNAL_INCLUDEDIR}>)
  target_compile_features(${target} INTERFACE cxx_std_20)
  set_property(GLOBAL APPEND PROPERTY GPIPE_EXPORTED_TARGETS ${target})
  if(GPIPE_INSTALL)
    install(TARGETS ${target} EXPORT gpipeTargets
            ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
            LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  endif()
endfunction()

# The gpipe libraries <target> links: its LINK_LIBRARIES and INTERFACE_LINK_LIBRARIES, aliases
# resolved, imported targets and generator expressions other than $<LINK_ONLY:...> left out.
function(_gpipe_linked_libraries target result_var)
  get_target_property(type ${target} TYPE)
  set(items)
  if(NOT type STREQUAL "INTERFACE_LIBRARY")
    get_target_property(link ${target} LINK_LIBRARIES)
    if(link)
      list(APPEND items ${link})
    endif()
  endif()
  get_target_property(interface ${target} INTERFACE_LINK_LIBRARIES)
  if(interface)
    list(APPEND items ${interface})
  endif()
  set(libraries)
  foreach(item IN LISTS items)
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" item "${item}")
    if(item MATCHES "^::@" OR item MATCHES "\\$<" OR NOT TARGET "${item}")
      continue()
    endif()
    get_target_property(aliased ${item} ALIASED_TARGET)
    if(aliased)
      set(item ${aliased})
    endif()
    get_target_property(imported ${item} IMPORTED)
    if(NOT imported)
      list(APPEND libraries ${item})
    endif()
  endforeach()
  set(${result_var} ${libraries} PARENT_SCOPE)
endfunction()

function(gpipe_check_exported)
  get_property(exported GLOBAL PROPERTY GPIPE_EXPORTED_TARGETS)
  set(queue ${ARGN})
  set(seen)
  set(missing)
  set(missing_lines)
  while(queue)
    list(POP_FRONT queue target)
    if(target IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${target})
    _gpipe_linked_libraries(${target} linked)
    foreach(library IN LISTS linked)
      if(NOT library IN_LIST exported AND NOT library IN_LIST missing)
        list(APPEND missing ${library})
        list(APPEND missing_lines "  ${library} (linked by ${target})")
      endif()
      list(APPEND queue ${library})
    endforeach()
  endwhile()
  if(missing)
    list(JOIN missing_lines "\n" missing_text)
    message(FATAL_ERROR
            "gpipe: libraries that gpipe_api or a program links are not exported:\n"
            "${missing_text}\n"
            "Call gpipe_export_library(<target>) next to each one's add_library "
            "(cmake/GpipeInstall.cmake), so the installed package and gpipe::<name> include it.")
  endif()
endfunction()

function(gpipe_install_package)
  if(NOT GPIPE_INSTALL)
    return()
  endif()
  # Public headers, and the generated version header beside them.
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/gpipe/
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gpipe FILES_MATCHING PATTERN "*.h")
  install(FILES ${PROJECT_BINARY_DIR}/gen/gpipe/version.h
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gpipe)
  # The internal headers the public ones include ("runtime/core/tensor.h", "layers/layer.h",
  # "proto/plan.pb.h"), by the same relative paths. The .cuh files are included only by .cu
  # sources, so they stay out; so do launcher/'s headers (the programs are installed, not their
  # parts).
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime ${PROJECT_SOURCE_DIR}/layers
          DESTINATION ${GPIPE_INSTALL_INTERNAL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
  install(DIRECTORY ${PROJECT_BINARY_DIR}/gen/proto
          DESTINATION ${GPIPE_INSTALL_INTERNAL_INCLUDEDIR} FILES_MATCHING PATTERN "*.pb.h")

  install(EXPORT gpipeTargets NAMESPACE gpipe:: DESTINATION ${GPIPE_INSTALL_CMAKEDIR})
  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/gpipeConfig.cmake.in
                                ${PROJECT_BINARY_DIR}/gpipeConfig.cmake
                                INSTALL_DESTINATION ${GPIPE_INSTALL_CMAKEDIR})
  # Before 1.0 a minor release may break the API (include/gpipe/version.h says so), so a request
  # for 0.1 accepts 0.1.x only; SameMajorVersion would let 0.2 satisfy it.
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/gpipeConfigVersion.cmake
                                   COMPATIBILITY SameMinorVersion)
  install(FILES ${PROJECT_BINARY_DIR}/gpipeConfig.cmake
                ${PROJECT_BINARY_DIR}/gpipeConfigVersion.cmake
                ${PROJECT_SOURCE_DIR}/cmake/GpipeImportedLibraries.cmake
          DESTINATION ${GPIPE_INSTALL_CMAKEDIR})
endfunction()
