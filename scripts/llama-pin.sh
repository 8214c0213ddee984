# Sourced by scripts/build-llama.sh and scripts/build-llama-server.sh: the
# llama.cpp builds ramforge is tested against, each shipped inside an npm
# package of node-llama-cpp as llama/gitRelease.bundle.
#
#   v0.5.0  node-llama-cpp@3.22.1  the pin: `make demo`, `make check`, CI
#   v0.4.0  node-llama-cpp@3.21.1  the previous pin: `make check-llama-prev`
#
# RAMFORGE_LLAMA_TAG picks one (default: the pin). Sets LLAMA_TAG and NPM_PKG.

LLAMA_TAG="${RAMFORGE_LLAMA_TAG:-v0.5.0}"
case "$LLAMA_TAG" in
    v0.5.0) NPM_PKG="node-llama-cpp@3.22.1" ;;
    v0.4.0) NPM_PKG="node-llama-cpp@3.21.1" ;;
    *)
        echo "${0##*/}: unknown llama.cpp tag '$LLAMA_TAG' (tested: v0.5.0, v0.4.0)" >&2
        exit 2
        ;;
esac
