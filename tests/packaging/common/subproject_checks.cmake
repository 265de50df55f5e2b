# Included after zab was brought in as a subproject (add_subdirectory or FetchContent): zab must
# not have built or installed anything of its own into the consumer's build.

foreach(option ZAB_BUILD_TESTS ZAB_BUILD_EXAMPLES ZAB_BUILD_BENCHMARKS ZAB_INSTALL
               ZAB_BUILD_FUZZERS)
    if(${option})
        message(FATAL_ERROR "${option} is ON although zab is not the top-level project")
    endif()
endforeach()
# Targets zab defines only for its own tests; verification targets are generated later, and the
# test script checks the generated build files for them.
foreach(target zab_catch_main zab_unit_tests zab_verify_headers)
    if(TARGET ${target})
        message(FATAL_ERROR "zab defined its test target ${target} in a consumer's build")
    endif()
endforeach()
