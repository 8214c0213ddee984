# ramforge_llama_target(PREFIX): defines the imported target ramforge::llama
# (llama.cpp's headers and libraries) from an install PREFIX (lib/ and
# include/; linked with an rpath to PREFIX/lib, as DT_RPATH), else
# find_package(llama), else pkg-config. A no-op when the target exists.
#
# The build uses it (cmake/llama.cmake), and it is installed beside
# ramforgeConfig.cmake, which calls it with the prefix the library was built
# against: find_package(ramforge) then links the same llama.cpp.
function(ramforge_llama_target prefix)
    if(TARGET ramforge::llama)
        return()
    endif()
    add_library(ramforge::llama INTERFACE IMPORTED)
    if(prefix)
        foreach(lib llama ggml ggml-base)
            string(MAKE_C_IDENTIFIER "RF_LIB_${lib}" var)
            find_library(${var} ${lib} PATHS ${prefix}/lib NO_DEFAULT_PATH REQUIRED)
            target_link_libraries(ramforge::llama INTERFACE ${${var}})
        endforeach()
        target_include_directories(ramforge::llama INTERFACE ${prefix}/include)
        target_link_libraries(ramforge::llama INTERFACE
            "-Wl,--disable-new-dtags,-rpath,${prefix}/lib")
        return()
    endif()
    find_package(llama CONFIG QUIET)
    if(llama_FOUND)
        target_link_libraries(ramforge::llama INTERFACE llama)
    else()
        find_package(PkgConfig REQUIRED)
        pkg_check_modules(LLAMA REQUIRED IMPORTED_TARGET llama)
        target_link_libraries(ramforge::llama INTERFACE PkgConfig::LLAMA)
    endif()
endfunction()
