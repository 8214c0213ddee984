#!/usr/bin/env bash
# Builds llama-server from the same pinned llama.cpp source as scripts/build-llama.sh
# (node-llama-cpp's gitRelease.bundle, scripts/llama-pin.sh), for bench/serve_idle.py's
# comparison; RAMFORGE_LLAMA_TAG picks the llama.cpp tag as there.
# Cached like llama.cpp under $RAMFORGE_CACHE (default /var/cache/ramforge); prints the
# binary's path. About 5 minutes on 2 cores the first time.
set -euo pipefail

# shellcheck source=scripts/llama-pin.sh
. "$(dirname "$0")/llama-pin.sh"
FLAGS=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF
       -DLLAMA_BUILD_COMMON=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON
       -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_OPENSSL=OFF)

cache="${RAMFORGE_CACHE:-/var/cache/ramforge}"
key=$(printf '%s\n' "$NPM_PKG" "$LLAMA_TAG" "${FLAGS[@]}" | sha256sum | cut -c1-12)
dir="$cache/llama-server-$LLAMA_TAG-$key"

if [ -x "$dir/llama-server" ]; then
    echo "$dir/llama-server"
    exit 0
fi
mkdir -p "$cache"
work=$(mktemp -d "$cache/work.XXXXXX")
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "$NPM_PKG" >/dev/null)
tar -xzf "$work"/node-llama-cpp-*.tgz -C "$work" package/llama/gitRelease.bundle
git clone -q "$work/package/llama/gitRelease.bundle" "$work/src" 2>/dev/null
echo "build-llama-server: building llama-server $LLAMA_TAG (about 5 minutes on 2 cores)" >&2
cmake -S "$work/src" -B "$work/build" "${FLAGS[@]}" >"$work/configure.log" 2>&1 ||
    { tail -20 "$work/configure.log" >&2; exit 1; }
cmake --build "$work/build" -j"$(nproc)" --target llama-server >"$work/build.log" 2>&1 ||
    { tail -40 "$work/build.log" >&2; exit 1; }
mkdir -p "$dir"
cp "$work/build/bin/llama-server" "$dir/llama-server.tmp"
mv "$dir/llama-server.tmp" "$dir/llama-server"
echo "$dir/llama-server"
