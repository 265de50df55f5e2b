// Catch2's main, compiled once (STYLE.md: compile time matters on 2 cores).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
