#!/usr/bin/env bash
# Builds the pinned llama.cpp (scripts/llama-pin.sh: v0.5.0, shipped inside
# the npm package node-llama-cpp@3.22.1 as llama/gitRelease.bundle) as
# CPU-only shared libraries and installs it into a cache prefix outside the
# checkout.
#
# The prefix is keyed by the tag, the package version and the CMake flags, so
# a changed flag builds a new prefix, the pins live side by side, and an
# unchanged one is reused by CI and later sessions. Prints the prefix on
# stdout as its last line.
#
#   RAMFORGE_CACHE      cache root (default /var/cache/ramforge)
#   RAMFORGE_LLAMA_TAG  v0.5.0 (the pin, default) or v0.4.0 (the previous pin)
set -euo pipefail

# shellcheck source=scripts/llama-pin.sh
. "$(dirname "$0")/llama-pin.sh"

cache="${RAMFORGE_CACHE:-/var/cache/ramforge}"
key=$(printf '%s\n' "$NPM_PKG" "$LLAMA_TAG" "${LLAMA_FLAGS[@]}" | sha256sum | cut -c1-12)
prefix="$cache/llama-$LLAMA_TAG-$key"

if [ -f "$prefix/.complete" ]; then
    echo "$prefix"
    exit 0
fi

for tool in npm git cmake c++; do
    command -v "$tool" >/dev/null || {
        echo "build-llama: $tool not found (run scripts/install-deps.sh)" >&2
        exit 1
    }
done

mkdir -p "$cache"
work=$(mktemp -d "$cache/work.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "build-llama: fetching $NPM_PKG" >&2
(cd "$work" && npm pack --silent "$NPM_PKG" >/dev/null)
tar -xzf "$work"/node-llama-cpp-*.tgz -C "$work" \
    package/llama/gitRelease.bundle package/llama/llama.cpp.info.json
tag=$(sed -n 's/.*"tag": *"\([^"]*\)".*/\1/p' "$work/package/llama/llama.cpp.info.json")
if [ "$tag" != "$LLAMA_TAG" ]; then
    echo "build-llama: $NPM_PKG ships llama.cpp $tag, expected $LLAMA_TAG" >&2
    exit 1
fi
git clone -q "$work/package/llama/gitRelease.bundle" "$work/src" 2>/dev/null

echo "build-llama: building llama.cpp $LLAMA_TAG (about 6 minutes on 2 cores)" >&2
rm -rf "$prefix"
cmake -S "$work/src" -B "$work/build" "${LLAMA_FLAGS[@]}" \
      -DCMAKE_INSTALL_PREFIX="$prefix" >"$work/configure.log" 2>&1 ||
    { tail -20 "$work/configure.log" >&2; exit 1; }
cmake --build "$work/build" -j"$(nproc)" >"$work/build.log" 2>&1 ||
    { tail -40 "$work/build.log" >&2; exit 1; }
cmake --install "$work/build" >/dev/null

# Sources ramforge uses besides the libraries: the tokenizer vocab for
# generated models, llama.cpp's own examples/simple (the token-parity
# reference) and the internal header declaring llama_get_memory_breakdown.
mkdir -p "$prefix/share/ramforge"
cp "$work/src/models/ggml-vocab-llama-spm.gguf" "$prefix/share/ramforge/"
cp "$work/src/examples/simple/simple.cpp" "$prefix/share/ramforge/"
cp -r "$work/src/src" "$prefix/share/ramforge/llama-src-headers"
find "$prefix/share/ramforge/llama-src-headers" -type f ! -name '*.h' -delete
llama_copy_server_tests "$work/src" "$prefix"
echo "$LLAMA_TAG $(git -C "$work/src" rev-parse --short HEAD)" > "$prefix/share/ramforge/llama.cpp.version"
touch "$prefix/.complete"
echo "$prefix"
