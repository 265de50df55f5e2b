#!/usr/bin/env bash
# tests/upgrade/build_baseline.sh REPOSITORY COMMIT OUT_DIR — builds the kv_server of an
# earlier release from git history, for the rolling-upgrade test (docs/protocol.md §0.2).
#
# Exports COMMIT's tree with `git archive` (the repository is not touched: no worktree, no
# checkout) into OUT_DIR/src, configures it with CMake (Release, examples only, ccache when
# installed) and builds its kv_server target into OUT_DIR/build. Prints the binary's path.
# A binary already built for COMMIT is reused (OUT_DIR/kv_server-COMMIT), so a second run
# costs nothing. Exit 0: built (or reused); 1: failed (the reason on stderr).
set -euo pipefail

repository="${1:?usage: build_baseline.sh REPOSITORY COMMIT OUT_DIR}"
commit="${2:?usage: build_baseline.sh REPOSITORY COMMIT OUT_DIR}"
out="${3:?usage: build_baseline.sh REPOSITORY COMMIT OUT_DIR}"

full=$(git -C "$repository" rev-parse --verify --quiet "$commit^{commit}") || {
    echo "error: $repository has no commit $commit (a shallow clone? the test needs the history)" >&2
    exit 1
}
binary="$out/kv_server-$full"
if [[ -x "$binary" ]]; then
    echo "$binary"
    exit 0
fi

rm -rf "$out/src" "$out/build"
mkdir -p "$out/src"
git -C "$repository" archive "$full" | tar -x -C "$out/src"
launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
{
    cmake -S "$out/src" -B "$out/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CXX_COMPILER=g++ -DZAB_BUILD_TESTS=OFF -DZAB_BUILD_BENCHMARKS=OFF \
        -DZAB_BUILD_EXAMPLES=ON -DZAB_INSTALL=OFF "${launcher[@]}" &&
        cmake --build "$out/build" --target kv_server -j "${ZAB_JOBS:-2}"
} >"$out/build.log" 2>&1 || {
    echo "error: building kv_server of $full failed; the end of $out/build.log:" >&2
    tail -n 30 "$out/build.log" >&2
    exit 1
}
found=$(find "$out/build" -name kv_server -type f -perm -u+x | head -n 1)
[[ -n "$found" ]] || { echo "error: no kv_server in $out/build" >&2; exit 1; }
cp "$found" "$binary"
rm -rf "$out/src" "$out/build"
echo "$binary"
