# shellcheck shell=bash
# scripts/lib.sh — shell helpers shared by scripts/test and scripts/demo. Source it (bash):
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#   zab_install_missing "${zab_debian_packages[@]}"
#   zab_configure_and_build dev
#
# Everything here prints to stdout; helpers return non-zero on failure (callers run with
# `set -euo pipefail`) and zab_die exits.

# What zab needs on Debian bookworm to build everything, tests and fuzzers included, and the
# API reference (doxygen, for scripts/api_docs).
# shellcheck disable=SC2034 # used by the scripts that source this file
zab_debian_packages=(
    libboost1.81-dev libfmt-dev catch2
    cmake ninja-build g++ clang libclang-rt-14-dev ccache
    redis-tools redis-server libssl-dev openssl curl libjemalloc-dev python3-redis doxygen
)

# The repository's root directory (this file lives in scripts/).
zab_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Parallel jobs for builds and ctest. The reference machine has 2 cores: default to 2.
zab_jobs="${ZAB_JOBS:-2}"

zab_say() { printf '==> %s\n' "$*"; }
zab_die() {
    printf 'error: %s\n' "$*" >&2
    exit 1
}

# zab_missing_packages PKG...: prints the packages that dpkg does not report as installed.
zab_missing_packages() {
    local package
    for package in "$@"; do
        if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
            printf '%s\n' "$package"
        fi
    done
}

# zab_install_missing PKG...: installs, with apt, the packages that are not installed yet.
# Runs apt-get update only when something is missing. apt's output goes to a log file whose
# tail is printed if apt fails. Not root: uses `sudo -n` when that works, else stops with a
# message naming the packages.
zab_install_missing() {
    if ! command -v dpkg-query >/dev/null 2>&1; then
        zab_say "not a Debian system: make sure these (or their equivalents) are installed: $*"
        return 0
    fi
    local missing
    missing=$(zab_missing_packages "$@" | tr '\n' ' ')
    missing="${missing% }"
    if [[ -z "$missing" ]]; then
        return 0
    fi

    local -a as_root=()
    if [[ $(id -u) -ne 0 ]]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            as_root=(sudo -n)
        else
            zab_die "missing packages: $missing
Install them as root, e.g.: sudo apt-get install $missing"
        fi
    fi

    local log="${TMPDIR:-/tmp}/zab-apt.$$.log"
    zab_say "installing: $missing (apt log: $log)"
    # shellcheck disable=SC2086 # $missing is a list of package names
    if ! { "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q &&
        "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -q --no-install-recommends $missing; } >"$log" 2>&1; then
        tail -n 30 "$log" >&2
        zab_die "apt-get failed installing: $missing (full log: $log)"
    fi
    missing=$(zab_missing_packages "$@" | tr '\n' ' ')
    if [[ -n "${missing% }" ]]; then
        zab_die "still missing after apt-get install: ${missing% } (log: $log)"
    fi
    rm -f "$log"
}

# zab_configure_and_build PRESET [TARGET...]: configures (quietly: the log is printed on
# failure) and builds a preset of CMakePresets.json (all presets use Ninja) with $zab_jobs jobs.
zab_configure_and_build() {
    local preset="$1"
    shift
    local binary_dir="$zab_root/build/$preset"
    local log_dir="$zab_root/build/logs"
    mkdir -p "$log_dir"

    # A build directory configured by hand with another generator cannot take the preset:
    # start its cache afresh (the object files stay, so ccache and ninja still help).
    local -a fresh=()
    if [[ -f "$binary_dir/CMakeCache.txt" ]] &&
        ! grep -qx 'CMAKE_GENERATOR:INTERNAL=Ninja' "$binary_dir/CMakeCache.txt"; then
        fresh=(--fresh)
    fi

    zab_say "configure: $preset"
    local log="$log_dir/configure-$preset.log"
    if ! (cd "$zab_root" && cmake --preset "$preset" "${fresh[@]}") >"$log" 2>&1; then
        cat "$log"
        printf 'error: configuring preset %s failed\n' "$preset"
        return 1
    fi
    # A cache made with another compiler is deleted and re-created by CMake, but without the
    # preset's other variables (build type, options): a second pass applies them.
    if grep -q 'require your cache to be deleted' "$log"; then
        if ! (cd "$zab_root" && cmake --preset "$preset") >>"$log" 2>&1; then
            cat "$log"
            printf 'error: configuring preset %s failed\n' "$preset"
            return 1
        fi
    fi
    zab_say "build: $preset"
    local -a targets=()
    if [[ $# -gt 0 ]]; then
        targets=(--target "$@")
    fi
    # -k 0: on an error, ninja still builds everything else, so one run reports every error.
    (cd "$zab_root" && cmake --build --preset "$preset" -j "$zab_jobs" "${targets[@]}" -- -k 0)
}
