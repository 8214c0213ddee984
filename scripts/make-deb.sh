#!/usr/bin/env bash
# make package: a Debian package of ramforge from a built tree (issue 37).
# Usage: scripts/make-deb.sh BUILD LLAMA_PREFIX OUTDIR     (prints the .deb's path)
#
# What it holds, under /usr: the CLI, libramforge.so and .a with the installed headers,
# ramforge.pc and the CMake package, the preload libraries of `ramforge exec`, the man page,
# the bash completion, README.md, CHANGELOG.md and the user guide (share/doc/ramforge).
# llama.cpp is not a Debian package, and `exec` and llama.cpp's internal tables need the very
# libllama ramforge was compiled against (the same GNU build ID), so the pinned build's shared
# libraries, headers and llama-server are bundled in a private prefix, /usr/lib/ramforge/llama
# (lib/, include/, bin/llama-server), which every ELF file of the package finds by a
# DT_RPATH relative to $ORIGIN (patchelf): nothing outside the package is searched for it,
# and the package unpacked into any root (dpkg -x) runs from there. ramforge.pc and
# ramforgeConfig.cmake point an embedder at that prefix. Depends: from dpkg-shlibdeps.
set -euo pipefail

build=$(realpath "$1")
llama=$(realpath "$2")
out=$(realpath "$3")
src=$(cd "$(dirname "$0")/.." && pwd)
for tool in patchelf dpkg-deb dpkg-shlibdeps fakeroot; do
    command -v "$tool" >/dev/null || { echo "make-deb: $tool is missing (scripts/install-deps.sh)" >&2; exit 1; }
done
version=$(sed -n 's/^project(ramforge VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
arch=$(dpkg --print-architecture)
llama_version=$(cat "$llama/share/ramforge/llama.cpp.version" 2>/dev/null || echo unknown)
stage=$(mktemp -d "$out/deb-stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT
root=$stage/root
priv=usr/lib/ramforge/llama

DESTDIR=$root cmake --install "$build" --prefix /usr >/dev/null
mkdir -p "$root/$priv/lib" "$root/$priv/include" "$root/usr/share/doc/ramforge"
cp -P "$llama"/lib/lib*.so* "$root/$priv/lib/"
cp -r "$llama"/include/. "$root/$priv/include/"
if [ -x "$llama/bin/llama-server" ]; then # llama-server for `ramforge exec`, the same build
    mkdir -p "$root/$priv/bin"
    cp "$llama/bin/llama-server" "$root/$priv/bin/"
fi
cp "$src/README.md" "$src/CHANGELOG.md" "$root/usr/share/doc/ramforge/"
cp -r "$src/docs/guide" "$root/usr/share/doc/ramforge/"

# Every ELF file of ramforge: its libraries by $ORIGIN, never the build machine's prefix.
libdir=$(cd "$root/usr" && dirname "$(find lib -name 'libramforge.so.*' -type f | head -n 1)")
while IFS= read -r elf; do
    rel=$(realpath --relative-to="$(dirname "$elf")" "$root/usr/$libdir")
    rel_llama=$(realpath --relative-to="$(dirname "$elf")" "$root/$priv/lib")
    patchelf --force-rpath --set-rpath "\$ORIGIN/$rel:\$ORIGIN/$rel_llama" "$elf"
done < <(find "$root/usr/bin" "$root/usr/$libdir" -maxdepth 1 -type f \
             \( -name ramforge -o -name 'libramforge*.so*' \))

# pkg-config and CMake: llama.cpp from the private prefix, relative to the file.
pc=$root/usr/$libdir/pkgconfig/ramforge.pc
sed -i -e '/^Requires: llama$/d' \
    -e 's|^Cflags: .*|& -I${prefix}/lib/ramforge/llama/include|' \
    -e 's|^Libs: -L${libdir} -lramforge\(.*\)|Libs: -L${libdir} -lramforge\1 -L${prefix}/lib/ramforge/llama/lib -lllama -lggml -lggml-base -Wl,-rpath,${libdir}:${prefix}/lib/ramforge/llama/lib|' \
    "$pc"
grep -q 'ramforge/llama/lib -lllama' "$pc" || { echo "make-deb: ramforge.pc not rewritten" >&2; exit 1; }
sed -i "s|ramforge_llama_target(\"$llama\")|ramforge_llama_target(\"\${PACKAGE_PREFIX_DIR}/lib/ramforge/llama\")|" \
    "$root/usr/$libdir/cmake/ramforge/ramforgeConfig.cmake"
! grep -rq "$llama" "$root/usr/$libdir/cmake/ramforge" "$pc" ||
    { echo "make-deb: $llama still named in the CMake package or ramforge.pc" >&2; exit 1; }

# Depends: the Debian packages of every library the ELF files load, the bundled ones aside.
mkdir -p "$stage/debian"
printf 'Source: ramforge\n\nPackage: ramforge\nArchitecture: any\n' >"$stage/debian/control"
elves=$(find "$root/usr/bin" "$root/usr/$libdir" "$root/$priv" -type f \
             \( -name ramforge -o -name '*.so*' -o -name llama-server \))
# shellcheck disable=SC2086
depends=$(cd "$stage" && dpkg-shlibdeps -O -l"$root/$priv/lib" -l"$root/usr/$libdir" \
              --ignore-missing-info $elves 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "make-deb: dpkg-shlibdeps found no dependency" >&2; exit 1; }

mkdir -p "$root/DEBIAN"
size=$(du -sk "$root/usr" | cut -f1)
cat >"$root/DEBIAN/control" <<EOF
Package: ramforge
Version: $version
Architecture: $arch
Maintainer: ramforge developers <ramforge@localhost>
Installed-Size: $size
Depends: $depends
Section: utils
Priority: optional
Homepage: https://github.com/ramforge/ramforge
Description: memory ledger and residency manager for llama.cpp models
 Where a llama.cpp model's memory goes, with the provenance of every figure;
 whether a model fits a container (fits / runs but thrashes / would be
 OOM-killed); llama-server and models larger than the memory limit run
 under a cgroup limit with idle release (ramforge watch, exec, inspect, run,
 serve).
 .
 llama.cpp $llama_version (the pin of ramforge's scripts/build-llama.sh, built
 CPU-only with shared libraries) is bundled in /usr/lib/ramforge/llama and
 found by RPATH: ramforge exec needs the very libllama ramforge was built
 against, and llama.cpp is not a Debian package. Its llama-server is
 /usr/lib/ramforge/llama/bin/llama-server.
EOF
deb="$out/ramforge_${version}_${arch}.deb"
fakeroot dpkg-deb --build -Zxz "$root" "$deb" >/dev/null
echo "$deb"
