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
