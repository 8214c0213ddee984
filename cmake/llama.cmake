# Locates llama.cpp: RAMFORGE_LLAMA_PREFIX (the pinned build of
# scripts/build-llama.sh, or a user's own install prefix), else
# find_package(llama), else pkg-config. Defines the target ramforge::llama
# (cmake/ramforge-llama.cmake) and RAMFORGE_LLAMA_SHARE (vocab, simple.cpp,
# internal headers; may be empty for a user's own install).
include(${CMAKE_CURRENT_LIST_DIR}/ramforge-llama.cmake)
ramforge_llama_target("${RAMFORGE_LLAMA_PREFIX}")
set(RAMFORGE_LLAMA_SHARE "")
if(RAMFORGE_LLAMA_PREFIX AND EXISTS ${RAMFORGE_LLAMA_PREFIX}/share/ramforge)
    set(RAMFORGE_LLAMA_SHARE ${RAMFORGE_LLAMA_PREFIX}/share/ramforge)
endif()
message(STATUS "ramforge: llama.cpp share dir: '${RAMFORGE_LLAMA_SHARE}'")
