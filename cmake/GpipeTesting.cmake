# Test helpers.
#   gpipe_add_test(NAME name SOURCES ... LIBS ... [LABELS ...] [TIMEOUT s] [PROCESSORS n])
#     a gtest binary, registered with ctest (label `unit` unless LABELS are given).
#   gpipe_add_mpi_test(NAME name NP n COMMAND exe args... [TIMEOUT s])
#     runs `mpirun -np n exe args...` under ctest with a hard timeout.
include(CMakeParseArguments)

set(GPIPE_MPIRUN_FLAGS --oversubscribe --bind-to none --mca btl self,vader
    CACHE STRING "Flags mpirun gets in tests")

# The same flags reach the e2e tests, which start mpirun themselves (tests/support).
string(JOIN " " GPIPE_MPIRUN_FLAGS_TEXT ${GPIPE_MPIRUN_FLAGS})

function(gpipe_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT;PROCESSORS" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT T_PROCESSORS)
    set(T_PROCESSORS 1)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
  set_target_properties(${T_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests)
  add_test(NAME ${T_NAME} COMMAND ${T_NAME})
  if(NOT T_LABELS)
    set(T_LABELS unit)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}"
                       PROCESSORS ${T_PROCESSORS}
                       ENVIRONMENT "GPIPE_BIN_DIR=${PROJECT_BINARY_DIR}/bin;GPIPE_SOURCE_DIR=${PROJECT_SOURCE_DIR};GPIPE_MPIRUN_FLAGS=${GPIPE_MPIRUN_FLAGS_TEXT};OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
endfunction()

function(gpipe_add_mpi_test)
  cmake_parse_arguments(T "" "NAME;NP;TIMEOUT" "COMMAND;LABELS" ${ARGN})
  set(T_LABELS_SUFFIX "")
  if(T_LABELS)
    set(T_LABELS_SUFFIX ";${T_LABELS}")
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  add_test(NAME ${T_NAME}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${T_NP} ${GPIPE_MPIRUN_FLAGS}
                   ${T_COMMAND})
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "mpi${T_LABELS_SUFFIX}"
                       PROCESSORS ${T_NP}
                       ENVIRONMENT "GPIPE_BIN_DIR=${PROJECT_BINARY_DIR}/bin;GPIPE_SOURCE_DIR=${PROJECT_SOURCE_DIR};OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
endfunction()
