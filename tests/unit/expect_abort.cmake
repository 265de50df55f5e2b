# expect_abort.cmake — runs assert_abort_helper and checks that ZAB_ASSERT aborted it with a
# message naming the expression, the message, the file and the line.
#   cmake -DHELPER=<path to assert_abort_helper> -P expect_abort.cmake
cmake_minimum_required(VERSION 3.21)

if(NOT HELPER)
    message(FATAL_ERROR "expect_abort.cmake: HELPER is not set")
endif()

include("${CMAKE_CURRENT_LIST_DIR}/../abort_env.cmake")

execute_process(COMMAND "${HELPER}"
                RESULT_VARIABLE result
                OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
set(report "exit: ${result}\n--- stdout ---\n${out}--- stderr ---\n${err}--- end ---")

# A process killed by a signal gives a string ("Child aborted"), not an exit code.
if(result MATCHES "^[0-9]+$")
    message(FATAL_ERROR "the helper exited with code ${result}; ZAB_ASSERT must abort()\n${report}")
endif()
if(NOT result MATCHES "[Aa]bort")
    message(FATAL_ERROR "the helper died, but not by abort()\n${report}")
endif()
if(out MATCHES "ZAB_ASSERT returned")
    message(FATAL_ERROR "the failing ZAB_ASSERT returned\n${report}")
endif()
if(NOT out MATCHES "assert_line=([0-9]+)")
    message(FATAL_ERROR "the helper did not report the assertion's line\n${report}")
endif()
set(line "${CMAKE_MATCH_1}")

set(expected "zab: assertion failed: quorum_size == 0 \\(quorum of zero peers\\) at [^\n]*assert_abort_helper\\.cpp:${line}\n")
if(NOT err MATCHES "${expected}")
    message(FATAL_ERROR "stderr does not match\n  ${expected}\n${report}")
endif()
set(matched "${CMAKE_MATCH_0}")
if(err MATCHES "a true assertion")
    message(FATAL_ERROR "the true assertion fired\n${report}")
endif()
message("aborted as expected: ${matched}")
