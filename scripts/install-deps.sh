#!/usr/bin/env bash
# Installs the Debian packages ramforge builds and tests with, when missing.
# Needs root (or sudo) only when something is missing.
set -euo pipefail

PACKAGES=(cmake make gcc g++ pkg-config git python3 python3-jsonschema libjansson-dev nettle-dev libcmocka-dev
          util-linux vmtouch libmicrohttpd-dev python3-prometheus-client curl
          python3-pytest python3-requests python3-wget python3-filelock
          man-db mandoc bash-completion librsvg2-bin jq clang libclang-rt-14-dev clang-format)
# ramforge watch's e2e: a real Prometheus (with promtool) scraping --listen.
PACKAGES+=(prometheus)
# e2e_streaming_read_ahead_no_direct: a squashfs image, a filesystem that refuses O_DIRECT.
PACKAGES+=(squashfs-tools)
# make package (scripts/make-deb.sh): the RPATH of the bundled llama.cpp, dpkg-shlibdeps.
PACKAGES+=(patchelf dpkg-dev fakeroot)

missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing+=("$p")
done
# npm may come with a Node.js that is not Debian's: any npm on PATH will do.
command -v npm >/dev/null || missing+=(npm)
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || {
        echo "install-deps: missing packages ${missing[*]} and not root" >&2
        exit 1
    }
    SUDO=sudo
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
