#!/usr/bin/env bash
# Builds llama-server from the same pinned llama.cpp source and CMake flags as
# scripts/build-llama.sh and installs it into that script's cache prefix: bin/llama-server
# with RUNPATH $ORIGIN/../lib, so it loads the cached libllama.so and libggml*.so (the
# build ID ramforge checks), plus any shared library only the server needs (libmtmd.so)
# in lib/, and the source's tools/server/tests in share/ramforge/server-tests (the
# suite tests/server_suite runs). Marks the prefix with .server-complete, so a second
# run (and CI) reuses it; prints the binary's path. About 5-10 minutes on 2 cores the
# first time. RAMFORGE_CACHE and RAMFORGE_LLAMA_TAG as for scripts/build-llama.sh.
# Also installs the headers of the libllama-common.so built here (common/*.h and
# common/jinja/*.h: JSON schema to grammar, the Jinja chat templates, for serve) into
# share/ramforge/llama-common-headers, marked .common-headers-complete: a prefix built
# before they were added gets them from the same source without a rebuild.
set -euo pipefail

here=$(dirname "$0")
# shellcheck source=scripts/llama-pin.sh
. "$here/llama-pin.sh"
prefix=$("$here/build-llama.sh" | tail -n 1)
server="$prefix/bin/llama-server"

if [ -f "$prefix/.server-complete" ] && [ -f "$prefix/.common-headers-complete" ]; then
    echo "$server"
    exit 0
fi

cache=$(dirname "$prefix")
work=$(mktemp -d "$cache/work.XXXXXX")
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "$NPM_PKG" >/dev/null)
tar -xzf "$work"/node-llama-cpp-*.tgz -C "$work" package/llama/gitRelease.bundle
git clone -q "$work/package/llama/gitRelease.bundle" "$work/src" 2>/dev/null
# The headers must describe the libraries of this prefix: the same commit.
built=$(cut -d' ' -f2 "$prefix/share/ramforge/llama.cpp.version")
if [ "$(git -C "$work/src" rev-parse --short HEAD)" != "$built" ]; then
    echo "build-llama-server: $NPM_PKG is not the source of $prefix ($built)" >&2
    exit 1
fi
common_headers() {
    local dest="$prefix/share/ramforge/llama-common-headers"
    rm -rf "$dest"
    mkdir -p "$dest/jinja"
    cp "$work/src/common/"*.h "$dest/"
    cp "$work/src/common/jinja/"*.h "$dest/jinja/"
    touch "$prefix/.common-headers-complete"
}
if [ -f "$prefix/.server-complete" ]; then
    common_headers
    echo "$server"
    exit 0
fi

# The library build's flags, then the switches that add the server (they do not change
# libllama's ABI) and its RUNPATH, set at link time so the binary can be copied as is.
echo "build-llama-server: building llama-server $LLAMA_TAG (about 5-10 minutes on 2 cores)" >&2
cmake -S "$work/src" -B "$work/build" "${LLAMA_FLAGS[@]}" \
      -DLLAMA_BUILD_COMMON=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
      -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON "-DCMAKE_INSTALL_RPATH=\$ORIGIN/../lib" \
      >"$work/configure.log" 2>&1 ||
    { tail -20 "$work/configure.log" >&2; exit 1; }
cmake --build "$work/build" -j"$(nproc)" --target llama-server >"$work/build.log" 2>&1 ||
    { tail -40 "$work/build.log" >&2; exit 1; }

# Shared libraries the server needs that the library prefix lacks (libmtmd.so): copied
# with their symlinks; the cached libllama and libggml* are never replaced.
mkdir -p "$prefix/bin" "$prefix/lib"
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
queue=("$work/build/bin/llama-server")
while [ "${#queue[@]}" -gt 0 ]; do
    obj=${queue[0]}
    queue=("${queue[@]:1}")
    for lib in $(needed "$obj"); do
        [ -e "$prefix/lib/$lib" ] && continue
        [ -e "$work/build/bin/$lib" ] || continue
        base=${lib%%.so*}
        cp -P "$work/build/bin/$base".so* "$prefix/lib/"
        queue+=("$work/build/bin/$lib")
    done
done
cp "$work/build/bin/llama-server" "$server.tmp"
mv "$server.tmp" "$server"
if LD_LIBRARY_PATH= ldd "$server" | grep -q 'not found'; then
    LD_LIBRARY_PATH= ldd "$server" >&2
    echo "build-llama-server: $server has unresolved libraries" >&2
    exit 1
fi
llama_copy_server_tests "$work/src" "$prefix"
common_headers
touch "$prefix/.server-complete"
echo "$server"
