# The test plan_reference_current: regenerates the plan reference into the build tree from the
# current proto/plan.proto and fails unless the committed proto/plan-reference.md is identical.
# Called with -DPROTOC -DGENERATOR -DSOURCE_DIR -DBINARY_DIR.
set(descriptor ${BINARY_DIR}/gen/plan_reference_check/plan_descriptor.pb)
set(generated ${BINARY_DIR}/gen/plan_reference_check/plan-reference.md)
set(committed ${SOURCE_DIR}/proto/plan-reference.md)
set(regenerate "cmake --build ${BINARY_DIR} --target plan_reference")
file(MAKE_DIRECTORY ${BINARY_DIR}/gen/plan_reference_check)
execute_process(
  COMMAND ${PROTOC} --include_source_info --include_imports --descriptor_set_out=${descriptor}
          -I ${SOURCE_DIR} ${SOURCE_DIR}/proto/plan.proto
  RESULT_VARIABLE protoc_status)
if(NOT protoc_status EQUAL 0)
  message(FATAL_ERROR "protoc failed on proto/plan.proto (status ${protoc_status})")
endif()
execute_process(COMMAND ${GENERATOR} ${descriptor} ${generated} RESULT_VARIABLE generator_status)
if(NOT generator_status EQUAL 0)
  message(FATAL_ERROR "the plan reference generator failed (status ${generator_status}); fix "
                      "proto/plan.proto's comments as it says, then run: ${regenerate}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${generated} ${committed}
                RESULT_VARIABLE differs)
if(NOT differs EQUAL 0)
  message(FATAL_ERROR
          "proto/plan-reference.md is not what proto/plan.proto's comments give (the current "
          "output is ${generated}). Regenerate it with\n  ${regenerate}\nand commit it.")
endif()
message(STATUS "proto/plan-reference.md is current")
