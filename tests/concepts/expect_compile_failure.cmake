# expect_compile_failure.cmake — compiles one source with -fsyntax-only and checks the outcome.
#
# Run as `cmake -D<var>=<value>... -P expect_compile_failure.cmake` (see CMakeLists.txt):
#   COMPILER         the C++ compiler; empty or *-NOTFOUND: the case is skipped ("ZAB_SKIP:")
#   COMPILER_FAMILY  gcc or clang, for messages only
#   SOURCE           the translation unit
#   FLAGS_FILE       preprocessor flags, one per line (-I..., -D...), from the zab::zab target
#   DEFINES          comma-separated macro names to define
#   EXPECT           failure: compilation must fail and its output must match REGEX;
#                    success: compilation must succeed (the positive control)
#   REGEX            a CMake regular expression ('.' also matches newlines)
# On any mismatch the test fails and prints the whole compiler output.

cmake_minimum_required(VERSION 3.21)

foreach(required COMPILER_FAMILY SOURCE FLAGS_FILE EXPECT)
    if("${${required}}" STREQUAL "")
        message(FATAL_ERROR "expect_compile_failure.cmake: ${required} is not set")
    endif()
endforeach()
if(NOT EXPECT MATCHES "^(failure|success)$")
    message(FATAL_ERROR "expect_compile_failure.cmake: EXPECT must be failure or success, not '${EXPECT}'")
endif()
if(EXPECT STREQUAL "failure" AND "${REGEX}" STREQUAL "")
    message(FATAL_ERROR "expect_compile_failure.cmake: EXPECT=failure needs a REGEX")
endif()

if("${COMPILER}" STREQUAL "" OR COMPILER MATCHES "-NOTFOUND$")
    # Matched by the test's SKIP_REGULAR_EXPRESSION: reported as skipped, not passed.
    message("ZAB_SKIP: no ${COMPILER_FAMILY} C++ compiler was found at configure time; "
            "this case needs one (install it and re-run cmake).")
    return()
endif()

file(STRINGS "${FLAGS_FILE}" flags)
if(NOT flags MATCHES "-I")
    message(FATAL_ERROR "${FLAGS_FILE} names no include directory: the zab::zab usage "
                        "requirements were not written")
endif()

set(arguments -std=c++20 -fsyntax-only -fdiagnostics-color=never ${flags})
string(REPLACE "," ";" defines "${DEFINES}")
foreach(define IN LISTS defines)
    list(APPEND arguments "-D${define}")
endforeach()
list(APPEND arguments "${SOURCE}")

# Untranslated diagnostics with ASCII quotes, whatever the caller's locale.
set(ENV{LC_ALL} C)
set(ENV{LANG} C)
execute_process(COMMAND "${COMPILER}" ${arguments}
                RESULT_VARIABLE exit_code
                OUTPUT_VARIABLE output
                ERROR_VARIABLE output)

list(JOIN arguments " " command_line)
set(report "command: ${COMPILER} ${command_line}\nexit: ${exit_code}\n--- compiler output ---\n${output}--- end ---")

if(EXPECT STREQUAL "success")
    if(NOT exit_code EQUAL 0)
        message(FATAL_ERROR "positive control failed: the unmodified archetype copy must "
                            "compile under ${COMPILER_FAMILY}\n${report}")
    endif()
    message("compiled as expected (${COMPILER_FAMILY})")
    return()
endif()

if(exit_code EQUAL 0)
    message(FATAL_ERROR "compilation succeeded, but a type missing a required member must be "
                        "rejected (${COMPILER_FAMILY})\n${report}")
endif()
if(NOT output MATCHES "${REGEX}")
    message(FATAL_ERROR "compilation failed, but the diagnostic does not match\n  ${REGEX}\n"
                        "so it may have failed for another reason, or no longer names the "
                        "missing member (${COMPILER_FAMILY})\n${report}")
endif()
message("rejected as expected (${COMPILER_FAMILY}); the diagnostic matches: ${CMAKE_MATCH_0}")
