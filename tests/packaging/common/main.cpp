// The whole of a consumer's use of zab in the packaging tests: include the umbrella header, build
// a zxid, format it; the headers' version is the package's. Exits non-zero (and says why) unless it prints as the seeds write it.
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
#ifdef ZAB_PACKAGE_VERSION
    if (zab::version_text != ZAB_PACKAGE_VERSION) {
        std::fprintf(stderr, "the zab package says version %s, its headers %.*s\n",
                     ZAB_PACKAGE_VERSION, static_cast<int>(zab::version_text.size()),
                     zab::version_text.data());
        return 1;
    }
#endif
    std::printf("zab consumer: %s (zab %.*s)\n", printed.c_str(),
                static_cast<int>(zab::version_text.size()), zab::version_text.data());
    return 0;
}
