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

# The llama.cpp build ramforge is compiled against, recorded in the library
# (rf_version, the check before llama.cpp's C++ internals are called) and in
# ramforge.pc: RF_LLAMA_VERSION (share/ramforge/llama.cpp.version: tag and
# commit), RF_LLAMA_SONAME and RF_LLAMA_BUILD_ID (GNU build ID) of libllama,
# read with readelf; "unknown" where they cannot be found.
set(RF_LLAMA_VERSION "unknown")
if(RAMFORGE_LLAMA_SHARE AND EXISTS ${RAMFORGE_LLAMA_SHARE}/llama.cpp.version)
    file(STRINGS ${RAMFORGE_LLAMA_SHARE}/llama.cpp.version RF_LLAMA_VERSION LIMIT_COUNT 1)
endif()
set(RF_LLAMA_SONAME "unknown")
set(RF_LLAMA_BUILD_ID "unknown")
set(rf_libllama "")
if(RF_LIB_llama)
    set(rf_libllama ${RF_LIB_llama})
elseif(TARGET llama)
    get_target_property(rf_libllama llama LOCATION)
elseif(LLAMA_LINK_LIBRARIES)
    list(FILTER LLAMA_LINK_LIBRARIES INCLUDE REGEX "libllama[^/]*$")
    list(GET LLAMA_LINK_LIBRARIES 0 rf_libllama)
endif()
find_program(RF_READELF NAMES readelf ${CMAKE_READELF})
if(rf_libllama AND EXISTS "${rf_libllama}" AND RF_READELF)
    execute_process(COMMAND ${RF_READELF} -d -n ${rf_libllama} OUTPUT_VARIABLE rf_elf
                    ERROR_QUIET)
    if(rf_elf MATCHES "Library soname: \\[(lib[A-Za-z0-9._+-]*)\\]")
        set(RF_LLAMA_SONAME ${CMAKE_MATCH_1})
    endif()
    if(rf_elf MATCHES "Build ID: ([0-9a-f]+)")
        set(RF_LLAMA_BUILD_ID ${CMAKE_MATCH_1})
    endif()
endif()
message(STATUS "ramforge: llama.cpp ${RF_LLAMA_VERSION}, ${RF_LLAMA_SONAME}, build ID ${RF_LLAMA_BUILD_ID}")

# Where this llama.cpp comes from, for `ramforge --version` (issue 37): RAMFORGE_LLAMA_ORIGIN
# when given (the package names its private copy), else the pin's npm package for a prefix
# of scripts/build-llama.sh, else the prefix given, else the finder.
if(NOT RAMFORGE_LLAMA_ORIGIN)
    if(RAMFORGE_LLAMA_PREFIX MATCHES "/llama-(v[0-9.]+)-[0-9a-f]+/?$")
        file(STRINGS ${PROJECT_SOURCE_DIR}/scripts/llama-pin.sh rf_pin
             REGEX "^ *${CMAKE_MATCH_1}\\) NPM_PKG=")
        string(REGEX REPLACE ".*NPM_PKG=\"([^\"]+)\".*" "\\1" rf_npm "${rf_pin}")
        set(RAMFORGE_LLAMA_ORIGIN "the pin, built from source by scripts/build-llama.sh (the llama.cpp of ${rf_npm}), CPU-only shared libraries")
    elseif(RAMFORGE_LLAMA_PREFIX)
        set(RAMFORGE_LLAMA_ORIGIN "the install prefix ${RAMFORGE_LLAMA_PREFIX} (LLAMA_PREFIX)")
    else()
        set(RAMFORGE_LLAMA_ORIGIN "found by find_package(llama) or pkg-config")
    endif()
endif()
message(STATUS "ramforge: llama.cpp origin: ${RAMFORGE_LLAMA_ORIGIN}")
