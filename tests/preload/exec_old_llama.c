/*
 * A program linked to another libllama build than ramforge's (RF_LLAMA_OLD,
 * by default the previous pin), for ramforge exec's mismatch refusal
 * (test_exec.py). It includes no llama.cpp header: it only initialises the
 * backend, so it builds against any version.
 */
#include <stdio.h>

void llama_backend_init(void);
void llama_backend_free(void);

int main(void)
{
    llama_backend_init();
    llama_backend_free();
    puts("ran");
    return 0;
}
