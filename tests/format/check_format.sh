#!/bin/sh
# Every tracked C, C++ and header file of the source tree SRC is formatted as
# .clang-format says: clang-format --dry-run -Werror over `git ls-files`.
# Skipped (exit 77) with the reason when clang-format is not installed, is of
# another major version than the tree was formatted with (versions format
# differently), or SRC is not a git checkout.
# Usage: check_format.sh SRC [MAJOR]   (MAJOR: default 14, Debian bookworm's)
src=$1
major=${2:-14}
cf=$(command -v "clang-format-$major" || command -v clang-format) || {
    echo "skip: clang-format is not installed (scripts/install-deps.sh installs it)"
    exit 77
}
version=$("$cf" --version | sed -n 's/.*clang-format version \([0-9]*\)\..*/\1/p')
if [ "$version" != "$major" ]; then
    echo "skip: $cf is version ${version:-unknown}, the tree is formatted with $major"
    exit 77
fi
files=$(git -C "$src" ls-files '*.c' '*.h' '*.cpp' 2>/dev/null) || {
    echo "skip: $src is not a git checkout: no list of tracked files"
    exit 77
}
cd "$src" || exit 1
# shellcheck disable=SC2086 # tracked paths hold no blanks
"$cf" --dry-run -Werror $files || {
    echo "FAIL: run clang-format -i on the files above"
    exit 1
}
echo "$(echo "$files" | wc -l) files formatted as .clang-format says ($cf)"
