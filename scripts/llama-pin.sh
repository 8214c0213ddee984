# Sourced by scripts/build-llama.sh and scripts/build-llama-server.sh: the
# llama.cpp builds ramforge is tested against, each shipped inside an npm
# package of node-llama-cpp as llama/gitRelease.bundle.
#
#   v0.5.0  node-llama-cpp@3.22.1  the pin: `make demo`, `make check`, CI
#   v0.4.0  node-llama-cpp@3.21.1  the previous pin: `make check-llama-prev`
#
# RAMFORGE_LLAMA_TAG picks one (default: the pin). Sets LLAMA_TAG, NPM_PKG and
# LLAMA_FLAGS (the library build's CMake flags; build-llama-server.sh adds the server's
# switches to the same list), and defines llama_copy_server_tests.

LLAMA_TAG="${RAMFORGE_LLAMA_TAG:-v0.5.0}"
case "$LLAMA_TAG" in
    v0.5.0) NPM_PKG="node-llama-cpp@3.22.1" ;;
    v0.4.0) NPM_PKG="node-llama-cpp@3.21.1" ;;
    *)
        echo "${0##*/}: unknown llama.cpp tag '$LLAMA_TAG' (tested: v0.5.0, v0.4.0)" >&2
        exit 2
        ;;
esac

LLAMA_FLAGS=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON
       -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_APP=OFF -DGGML_NATIVE=OFF
       -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF
       -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF
       -DLLAMA_OPENSSL=OFF "-DCMAKE_INSTALL_RPATH=\$ORIGIN"
       -DCMAKE_INSTALL_LIBDIR=lib)

# llama_copy_server_tests SRC PREFIX: the source's llama-server test-suite (pytest) into
# PREFIX/share/ramforge/server-tests, which tests/server_suite runs.
llama_copy_server_tests() {
    rm -rf "$2/share/ramforge/server-tests"
    mkdir -p "$2/share/ramforge"
    cp -r "$1/tools/server/tests" "$2/share/ramforge/server-tests"
}
