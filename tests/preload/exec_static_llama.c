/*
 * A program that links "llama.cpp" statically, for ramforge exec's refusal
 * (test_exec.py): it defines llama_model_load_from_file itself, as a
 * program built against libllama.a does, so no preload can stand between
 * it and the call. Built -static when the C library allows it.
 */
#include <stdio.h>

struct llama_model;

struct llama_model *llama_model_load_from_file(const char *path);
struct llama_model *llama_model_load_from_file(const char *path)
{
    (void)path;
    return NULL;
}

int main(int argc, char **argv)
{
    (void)argc;
    puts(llama_model_load_from_file(argv[0]) ? "loaded" : "static");
    return 0;
}
