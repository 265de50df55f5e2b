# Runs one packaging test: obtains zab the way MODE says, then configures, builds and runs a tiny
# consumer project in a fresh directory. `cmake -P` script; fails with FATAL_ERROR.
#
# MODE              find_package    configure zab alone (tests off), install it to one prefix,
#                                   move the prefix elsewhere, consume it from the new place
#                   build_tree      configure zab alone, consume its build tree (zab_DIR)
#                   add_subdirectory, fetchcontent   consume zab's source tree as a subproject
# ZAB_SOURCE_DIR    zab's source tree
# CONSUMERS_DIR     tests/packaging (holds the consumer projects)
# WORK_DIR          scratch directory, emptied first
# GENERATOR, MAKE_PROGRAM, CXX_COMPILER, CXX_COMPILER_LAUNCHER   passed to every configure

foreach(var MODE ZAB_SOURCE_DIR CONSUMERS_DIR WORK_DIR GENERATOR CXX_COMPILER)
    if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
        message(FATAL_ERROR "run_consumer.cmake: ${var} is not set")
    endif()
endforeach()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

set(common_args -G "${GENERATOR}" "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}"
    # Only what this script names: no package from ~/.cmake/packages or a system-wide zab.
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)
if(MAKE_PROGRAM)
    list(APPEND common_args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
if(CXX_COMPILER_LAUNCHER)
    list(APPEND common_args "-DCMAKE_CXX_COMPILER_LAUNCHER=${CXX_COMPILER_LAUNCHER}")
endif()

# run(<step name> <command...>): runs a command; on failure prints its output and stops.
function(run step)
    message(STATUS "[${MODE}] ${step}: ${ARGN}")
    execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE output
                    ERROR_VARIABLE output)
    if(NOT result EQUAL 0)
        message(FATAL_ERROR "[${MODE}] ${step} failed (${result}):\n${output}")
    endif()
    set(last_output "${output}" PARENT_SCOPE)
endfunction()

# require_no_string(<file> <string> <what>): the file must not mention the string.
function(require_no_string file string what)
    file(READ "${file}" content)
    string(FIND "${content}" "${string}" position)
    if(NOT position EQUAL -1)
        message(FATAL_ERROR "[${MODE}] ${file} mentions ${what} (${string})")
    endif()
endfunction()

# zab configured as the top-level project, as a packager would: no tests, examples, benchmarks.
function(configure_zab_alone build_dir)
    run("configure zab" "${CMAKE_COMMAND}" -S "${ZAB_SOURCE_DIR}" -B "${build_dir}"
        ${common_args} -DZAB_BUILD_TESTS=OFF -DZAB_BUILD_EXAMPLES=OFF
        -DZAB_BUILD_BENCHMARKS=OFF -DZAB_INSTALL=ON)
    run("build zab" "${CMAKE_COMMAND}" --build "${build_dir}")
endfunction()

set(consumer_build "${WORK_DIR}/consumer-build")
set(consumer_args)
if(MODE STREQUAL "find_package")
    set(zab_build "${WORK_DIR}/zab-build")
    set(first_prefix "${WORK_DIR}/first-prefix")
    set(moved_prefix "${WORK_DIR}/moved/prefix")
    configure_zab_alone("${zab_build}")
    run("install zab" "${CMAKE_COMMAND}" --install "${zab_build}" --prefix "${first_prefix}")

    # The installed tree: every public header, the package files, the licence.
    file(GLOB_RECURSE source_headers RELATIVE "${ZAB_SOURCE_DIR}/include"
         "${ZAB_SOURCE_DIR}/include/zab/*.hpp")
    if(NOT source_headers)
        message(FATAL_ERROR "[${MODE}] no headers found under ${ZAB_SOURCE_DIR}/include/zab")
    endif()
    set(package_dir "share/cmake/zab")
    foreach(file IN LISTS source_headers ITEMS ${package_dir}/zabConfig.cmake
                 ${package_dir}/zabConfigVersion.cmake ${package_dir}/zabTargets.cmake
                 share/doc/zab/LICENSE)
        if(file MATCHES "^zab/")
            set(file "include/${file}")
        endif()
        if(NOT EXISTS "${first_prefix}/${file}")
            message(FATAL_ERROR "[${MODE}] the install lacks ${file}")
        endif()
    endforeach()

    # Relocatable: move the prefix, delete zab's build tree, and nothing may point back.
    file(MAKE_DIRECTORY "${WORK_DIR}/moved")
    file(RENAME "${first_prefix}" "${moved_prefix}")
    file(REMOVE_RECURSE "${zab_build}")
    file(GLOB package_files "${moved_prefix}/${package_dir}/*")
    foreach(file IN LISTS package_files)
        require_no_string("${file}" "${first_prefix}" "the install prefix it was installed to")
        require_no_string("${file}" "${ZAB_SOURCE_DIR}" "zab's source tree")
        require_no_string("${file}" "${WORK_DIR}" "the directory it was built in")
    endforeach()

    set(consumer_source "${CONSUMERS_DIR}/find_package")
    # The installed package also builds README.md's minimal example (common/consumer.cmake).
    list(APPEND consumer_args "-DCMAKE_PREFIX_PATH=${moved_prefix}"
         "-DZAB_EXPECTED_INCLUDE_DIR=${moved_prefix}/include"
         "-DZAB_README=${ZAB_SOURCE_DIR}/README.md")
elseif(MODE STREQUAL "build_tree")
    set(zab_build "${WORK_DIR}/zab-build")
    configure_zab_alone("${zab_build}")
    set(consumer_source "${CONSUMERS_DIR}/find_package")
    list(APPEND consumer_args "-Dzab_DIR=${zab_build}"
         "-DZAB_EXPECTED_INCLUDE_DIR=${ZAB_SOURCE_DIR}/include")
elseif(MODE STREQUAL "add_subdirectory" OR MODE STREQUAL "fetchcontent")
    set(consumer_source "${CONSUMERS_DIR}/${MODE}")
    list(APPEND consumer_args "-DZAB_SOURCE_DIR=${ZAB_SOURCE_DIR}")
else()
    message(FATAL_ERROR "run_consumer.cmake: unknown MODE '${MODE}'")
endif()

run("configure the consumer" "${CMAKE_COMMAND}" -S "${consumer_source}" -B "${consumer_build}"
    ${common_args} ${consumer_args})
run("build the consumer" "${CMAKE_COMMAND}" --build "${consumer_build}")

if(MODE STREQUAL "add_subdirectory" OR MODE STREQUAL "fetchcontent")
    # Nothing of zab's own test build may reach the consumer's build.
    file(GLOB_RECURSE build_files "${consumer_build}/*.ninja" "${consumer_build}/Makefile")
    foreach(file IN LISTS build_files)
        foreach(target zab_catch_main zab_unit_tests _verify_interface_header_sets)
            require_no_string("${file}" "${target}" "a target of zab's tests")
        endforeach()
    endforeach()
    file(GLOB_RECURSE test_files "${consumer_build}/CTestTestfile.cmake")
    if(test_files)
        message(FATAL_ERROR "[${MODE}] zab registered tests in the consumer's build: ${test_files}")
    endif()
endif()

if(MODE STREQUAL "find_package")
    # The consumer compiles against the moved prefix, not against zab's source tree.
    file(READ "${consumer_build}/build.ninja" build_ninja)
    string(FIND "${build_ninja}" "${moved_prefix}/include" position)
    if(position EQUAL -1)
        message(FATAL_ERROR "[${MODE}] the consumer is not compiled against ${moved_prefix}/include")
    endif()
    require_no_string("${consumer_build}/build.ninja" "${ZAB_SOURCE_DIR}/include" "zab's sources")
endif()

run("run the consumer" "${consumer_build}/consumer")
if(NOT last_output MATCHES "zab consumer: <1, 2>")
    message(FATAL_ERROR "[${MODE}] unexpected output from the consumer:\n${last_output}")
endif()
if(MODE STREQUAL "find_package")
    run("run README.md's minimal example" "${consumer_build}/readme_example")
    if(NOT last_output MATCHES "readme example: built")
        message(FATAL_ERROR "[${MODE}] unexpected output from readme_example:\n${last_output}")
    endif()
    # A one-voter group behind the compile firewall, in a fresh directory: one write committed
    # and its result (the byte count, 7) returned.
    file(REMOVE_RECURSE "${WORK_DIR}/firewall-data")
    run("run the compile-firewall consumer" "${consumer_build}/firewall" "${WORK_DIR}/firewall-data")
    if(NOT last_output MATCHES "firewall: committed <1, 1>, total 7")
        message(FATAL_ERROR "[${MODE}] unexpected output from firewall:\n${last_output}")
    endif()
endif()
message(STATUS "[${MODE}] ok")
