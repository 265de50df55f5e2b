// Unit tests of the logging hook: redirection, levels, and no formatting below the level.
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include <catch2/catch.hpp>
#include <unistd.h>

#include "zab/core/logging.hpp"
#include "zab/core/zxid.hpp"

namespace {

// An argument whose formatting is observable: its formatter counts its calls.
struct counted {
    int value = 0;
    static inline int formatted = 0;
};

struct captured_line {
    zab::log_level level;
    std::string text;
};

void capture(void* context, zab::log_level level, std::string_view line) {
    static_cast<std::vector<captured_line>*>(context)->push_back({level, std::string{line}});
}

// Puts the process-wide logger back as a test found it (the default: stderr, warn).
struct logger_reset {
    logger_reset() { counted::formatted = 0; }
    ~logger_reset() {
        zab::set_log_sink(nullptr);
        zab::set_log_level(zab::log_level::warn);
    }
};

// Redirects file descriptor 2 to a temporary file for its lifetime.
class stderr_capture {
public:
    stderr_capture() : file_{std::tmpfile()} {
        REQUIRE(file_ != nullptr);
        std::fflush(stderr);
        saved_ = ::dup(2);
        REQUIRE(saved_ >= 0);
        REQUIRE(::dup2(::fileno(file_), 2) == 2);
    }
    stderr_capture(const stderr_capture&) = delete;
    stderr_capture& operator=(const stderr_capture&) = delete;
    ~stderr_capture() {
        restore();
        std::fclose(file_);
    }

    /// Restores stderr and returns what was written to it meanwhile.
    std::string finish() {
        restore();
        std::string text;
        std::rewind(file_);
        char buffer[256];
        std::size_t read = 0;
        while ((read = std::fread(buffer, 1, sizeof buffer, file_)) > 0) text.append(buffer, read);
        return text;
    }

private:
    void restore() {
        if (saved_ < 0) return;
        std::fflush(stderr);
        ::dup2(saved_, 2);
        ::close(saved_);
        saved_ = -1;
    }

    std::FILE* file_;
    int saved_ = -1;
};

}  // namespace

template <>
struct fmt::formatter<counted> {
    constexpr auto parse(format_parse_context& ctx) { return ctx.begin(); }
    template <typename Context>
    auto format(const counted& c, Context& ctx) const {
        ++counted::formatted;
        return fmt::format_to(ctx.out(), "counted({})", c.value);
    }
};

TEST_CASE("the counting formatter counts (so the tests below can fail)") {
    logger_reset reset;
    CHECK(fmt::format("{}", counted{3}) == "counted(3)");
    CHECK(counted::formatted == 1);
}

TEST_CASE("a redirected sink receives each formatted line with its level") {
    logger_reset reset;
    std::vector<captured_line> lines;
    zab::set_log_sink(&capture, &lines);
    zab::set_log_level(zab::log_level::trace);

    zab::log(zab::log_level::info, "peer {} leads epoch {} from {}", 3, 2, zab::zxid{2, 0});
    zab::log(zab::log_level::error, "fsync failed: {}", "EIO");
    zab::log(zab::log_level::trace, "{}", counted{7});

    REQUIRE(lines.size() == 3);
    CHECK(lines[0].level == zab::log_level::info);
    CHECK(lines[0].text == "peer 3 leads epoch 2 from <2, 0>");
    CHECK(lines[1].level == zab::log_level::error);
    CHECK(lines[1].text == "fsync failed: EIO");
    CHECK(lines[2].level == zab::log_level::trace);
    CHECK(lines[2].text == "counted(7)");
    CHECK(counted::formatted == 1);
}

TEST_CASE("lines below the level are neither formatted nor delivered") {
    logger_reset reset;
    std::vector<captured_line> lines;
    zab::set_log_sink(&capture, &lines);
    zab::set_log_level(zab::log_level::warn);

    CHECK_FALSE(zab::log_enabled(zab::log_level::trace));
    CHECK_FALSE(zab::log_enabled(zab::log_level::debug));
    CHECK_FALSE(zab::log_enabled(zab::log_level::info));
    CHECK(zab::log_enabled(zab::log_level::warn));
    CHECK(zab::log_enabled(zab::log_level::error));

    zab::log(zab::log_level::trace, "{}", counted{1});
    zab::log(zab::log_level::debug, "{}", counted{2});
    zab::log(zab::log_level::info, "{} {}", counted{3}, counted{4});
    CHECK(counted::formatted == 0);
    CHECK(lines.empty());

    zab::log(zab::log_level::warn, "{}", counted{5});
    CHECK(counted::formatted == 1);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].level == zab::log_level::warn);
    CHECK(lines[0].text == "counted(5)");
}

TEST_CASE("log_level::off silences everything") {
    logger_reset reset;
    std::vector<captured_line> lines;
    zab::set_log_sink(&capture, &lines);
    zab::set_log_level(zab::log_level::off);

    CHECK_FALSE(zab::log_enabled(zab::log_level::error));
    zab::log(zab::log_level::error, "{}", counted{1});
    CHECK(counted::formatted == 0);
    CHECK(lines.empty());
}

TEST_CASE("set_log_sink(nullptr) restores the stderr sink") {
    logger_reset reset;
    std::vector<captured_line> lines;
    zab::set_log_sink(&capture, &lines);
    zab::set_log_level(zab::log_level::info);
    zab::log(zab::log_level::info, "to the sink");
    REQUIRE(lines.size() == 1);

    zab::set_log_sink(nullptr);
    stderr_capture captured;
    zab::log(zab::log_level::warn, "to stderr: {}", zab::zxid{1, 2});
    zab::log(zab::log_level::debug, "below the level");
    const auto text = captured.finish();

    CHECK(lines.size() == 1);  // the old sink got nothing more
    CHECK(text == "zab warn: to stderr: <1, 2>\n");
}
