# abort_env.cmake — included by the scripts that expect a helper to die by abort()
# (tests/unit/expect_abort.cmake, tests/protocol/expect_abort_case.cmake): under sanitizers,
# leave SIGABRT alone, since a sanitizer that handles it turns the abort into an exit code,
# which is what those scripts must tell apart. Later options override earlier ones.
foreach(options ASAN_OPTIONS UBSAN_OPTIONS)
    if(DEFINED ENV{${options}} AND NOT "$ENV{${options}}" STREQUAL "")
        set(ENV{${options}} "$ENV{${options}}:handle_abort=0")
    else()
        set(ENV{${options}} "handle_abort=0")
    endif()
endforeach()
