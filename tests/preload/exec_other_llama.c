/*
 * A program linked to libllama, for ramforge exec's mismatch refusal
 * (test_exec_engine.py's mismatched_llama): the test points the dynamic
 * loader (LD_LIBRARY_PATH, before this program's RUNPATH) at a copy of the
 * pin's libllama with another GNU build ID. Without an argument it only
 * initialises the backend and prints "ran"; with MODEL it loads it (mmap)
 * and frees it, printing "loaded" (the preload's own check at the load).
 * Usage: exec_other_llama [MODEL]
 */
#include <stdio.h>

#include "llama.h"

int main(int argc, char **argv)
{
    llama_backend_init();
    if (argc > 1) {
        struct llama_model_params mp = llama_model_default_params();
        mp.load_mode = LLAMA_LOAD_MODE_MMAP;
        struct llama_model *model = llama_model_load_from_file(argv[1], mp);
        if (!model) {
            fprintf(stderr, "exec_other_llama: cannot load %s\n", argv[1]);
            return 1;
        }
        llama_model_free(model);
    }
    llama_backend_free();
    puts(argc > 1 ? "loaded" : "ran");
    return 0;
}
