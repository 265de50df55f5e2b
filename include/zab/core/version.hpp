// zab/core/version.hpp — zab's release version. The one place it is written: CMakeLists.txt
// reads these three numbers into `project(zab VERSION …)` (docs/compatibility.md, Versions).
#pragma once

#include <string_view>

#define ZAB_VERSION_MAJOR 0
#define ZAB_VERSION_MINOR 2
#define ZAB_VERSION_PATCH 0

#define ZAB_VERSION_TEXT_(major, minor, patch) #major "." #minor "." #patch
#define ZAB_VERSION_TEXT(major, minor, patch) ZAB_VERSION_TEXT_(major, minor, patch)

namespace zab {

/// The release this header belongs to, e.g. for a replica to log at start or report.
struct release_version {
    int major;
    int minor;
    int patch;
};
inline constexpr release_version version{ZAB_VERSION_MAJOR, ZAB_VERSION_MINOR, ZAB_VERSION_PATCH};
/// The same as text: "0.2.0".
inline constexpr std::string_view version_text =
    ZAB_VERSION_TEXT(ZAB_VERSION_MAJOR, ZAB_VERSION_MINOR, ZAB_VERSION_PATCH);

}  // namespace zab
