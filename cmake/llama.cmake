# Locates llama.cpp: RAMFORGE_LLAMA_PREFIX (the pinned build of
# scripts/build-llama.sh, or a user's own install prefix), else
# find_package(llama), else pkg-config. Defines the target ramforge::llama
# and RAMFORGE_LLAMA_SHARE (vocab, simple.cpp, internal headers; may be empty
# for a user's own install).
set(RAMFORGE_LLAMA_SHARE "")
if(RAMFORGE_LLAMA_PREFIX)
    find_library(RF_LLAMA_LIB llama PATHS ${RAMFORGE_LLAMA_PREFIX}/lib NO_DEFAULT_PATH REQUIRED)
    find_library(RF_GGML_LIB ggml PATHS ${RAMFORGE_LLAMA_PREFIX}/lib NO_DEFAULT_PATH REQUIRED)
    find_library(RF_GGML_BASE_LIB ggml-base PATHS ${RAMFORGE_LLAMA_PREFIX}/lib NO_DEFAULT_PATH REQUIRED)
    add_library(ramforge::llama INTERFACE IMPORTED)
    target_include_directories(ramforge::llama INTERFACE ${RAMFORGE_LLAMA_PREFIX}/include)
    target_link_libraries(ramforge::llama INTERFACE
        ${RF_LLAMA_LIB} ${RF_GGML_LIB} ${RF_GGML_BASE_LIB}
        "-Wl,--disable-new-dtags,-rpath,${RAMFORGE_LLAMA_PREFIX}/lib")
    if(EXISTS ${RAMFORGE_LLAMA_PREFIX}/share/ramforge)
        set(RAMFORGE_LLAMA_SHARE ${RAMFORGE_LLAMA_PREFIX}/share/ramforge)
    endif()
else()
    find_package(llama CONFIG QUIET)
    if(llama_FOUND)
        add_library(ramforge::llama INTERFACE IMPORTED)
        target_link_libraries(ramforge::llama INTERFACE llama)
    else()
        pkg_check_modules(LLAMA REQUIRED IMPORTED_TARGET llama)
        add_library(ramforge::llama INTERFACE IMPORTED)
        target_link_libraries(ramforge::llama INTERFACE PkgConfig::LLAMA)
    endif()
endif()
message(STATUS "ramforge: llama.cpp share dir: '${RAMFORGE_LLAMA_SHARE}'")
