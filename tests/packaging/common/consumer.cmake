# Shared by the three consumer projects, after zab::zab and zab::asio are available however they
# were obtained.

foreach(target zab::zab zab::asio)
    if(NOT TARGET ${target})
        message(FATAL_ERROR "${target} is not defined")
    endif()
endforeach()

add_executable(consumer ${CMAKE_CURRENT_LIST_DIR}/main.cpp)
# zab::asio too, to prove the second exported target (and its Threads dependency) resolves.
target_link_libraries(consumer PRIVATE zab::zab zab::asio)
# A consumer with strict warnings must not be broken by zab's headers.
target_compile_options(consumer PRIVATE -Wall -Wextra -Wpedantic -Werror)
# find_package's version (from zabConfigVersion.cmake) must be the headers' version.
if(DEFINED zab_VERSION)
    target_compile_definitions(consumer PRIVATE ZAB_PACKAGE_VERSION="${zab_VERSION}")
endif()

# README.md's minimal example, compiled as it is written (ZAB_README: the README to take it
# from; given in one mode, since it compiles the whole runtime). The first ```cpp block after
# "## A minimal example": its #include lines go to the top of readme_example.cpp.in, the rest
# into a function there.
if(DEFINED ZAB_README)
    file(READ "${ZAB_README}" readme)
    string(FIND "${readme}" "\n## A minimal example" section)
    if(section EQUAL -1)
        message(FATAL_ERROR "${ZAB_README} has no '## A minimal example' section")
    endif()
    string(SUBSTRING "${readme}" ${section} -1 readme)
    string(FIND "${readme}" "\n```cpp\n" open)
    if(open EQUAL -1)
        message(FATAL_ERROR "${ZAB_README}: no ```cpp block in '## A minimal example'")
    endif()
    math(EXPR open "${open} + 8")
    string(SUBSTRING "${readme}" ${open} -1 readme)
    string(FIND "${readme}" "\n```" close)
    string(SUBSTRING "${readme}" 0 ${close} snippet)
    string(REPLACE ";" "\\;" snippet "${snippet}")
    string(REPLACE "\n" ";" snippet_lines "${snippet}")
    set(readme_includes "")
    set(readme_body "")
    foreach(line IN LISTS snippet_lines)
        if(line MATCHES "^#include")
            string(APPEND readme_includes "${line}\n")
        else()
            string(APPEND readme_body "    ${line}\n")
        endif()
    endforeach()
    if(readme_includes STREQUAL "" OR NOT readme_body MATCHES "node")
        message(FATAL_ERROR "${ZAB_README}: the minimal example has no #include or no node")
    endif()
    configure_file(${CMAKE_CURRENT_LIST_DIR}/readme_example.cpp.in
                   ${CMAKE_CURRENT_BINARY_DIR}/readme_example.cpp @ONLY)
    add_executable(readme_example ${CMAKE_CURRENT_BINARY_DIR}/readme_example.cpp)
    target_link_libraries(readme_example PRIVATE zab::asio)  # as the README says
    target_compile_options(readme_example PRIVATE -Wall -Wextra -Wpedantic -Werror)

    # The compile firewall (zab/runtime/replica.hpp): a source without Boost.Asio (it fails to
    # compile if the header brings it) and the one source that compiles the node.
    add_executable(firewall ${CMAKE_CURRENT_LIST_DIR}/firewall_app.cpp
                            ${CMAKE_CURRENT_LIST_DIR}/firewall_main.cpp)
    target_link_libraries(firewall PRIVATE zab::asio)
    target_compile_options(firewall PRIVATE -Wall -Wextra -Wpedantic -Werror)
endif()
