// The whole of a consumer's use of zab in the packaging tests: include the umbrella header, build
// a zxid, format it. Exits non-zero (and says why) unless it prints as the seeds write it.
#include <cstdio>
#include <string>

#include <fmt/format.h>
#include <zab/zab.hpp>  // as a consumer spells it: zab is a library found on the include path

int main() {
    const zab::zxid z{1, 2};
    const std::string printed = fmt::format("{}", z);
    if (printed != "<1, 2>") {
        std::fprintf(stderr, "zab::zxid{1, 2} formats as '%s', expected '<1, 2>'\n",
                     printed.c_str());
        return 1;
    }
    std::printf("zab consumer: %s\n", printed.c_str());
    return 0;
}
