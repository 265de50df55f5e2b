# expect_abort_case.cmake — runs HELPER CASE and checks that ZAB_ASSERT aborted it with a
# message containing EXPECTED (and, if given, that stdout contains BEFORE: the valid step
# before the broken one passed).
#   cmake -DHELPER=<path> -DCASE=<name> -DEXPECTED=<text> [-DBEFORE=<text>] -P expect_abort_case.cmake
cmake_minimum_required(VERSION 3.21)

foreach(var HELPER CASE EXPECTED)
    if(NOT DEFINED ${var})
        message(FATAL_ERROR "expect_abort_case.cmake: ${var} is not set")
    endif()
endforeach()

include("${CMAKE_CURRENT_LIST_DIR}/../abort_env.cmake")

execute_process(COMMAND "${HELPER}" "${CASE}"
                RESULT_VARIABLE result
                OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
set(report "exit: ${result}\n--- stdout ---\n${out}--- stderr ---\n${err}--- end ---")
if(result MATCHES "^[0-9]+$" OR NOT result MATCHES "[Aa]bort")
    message(FATAL_ERROR "${CASE}: the helper was not aborted by ZAB_ASSERT\n${report}")
endif()
string(FIND "${err}" "zab: assertion failed:" at_assert)
string(FIND "${err}" "${EXPECTED}" at_expected)
if(at_assert LESS 0 OR at_expected LESS 0)
    message(FATAL_ERROR "${CASE}: stderr does not name the assertion '${EXPECTED}'\n${report}")
endif()
if(DEFINED BEFORE)
    string(FIND "${out}" "${BEFORE}" at_before)
    if(at_before LESS 0)
        message(FATAL_ERROR "${CASE}: '${BEFORE}' missing: the valid step did not pass\n${report}")
    endif()
endif()
message("${CASE}: aborted as expected (${EXPECTED})")
