/*
 * What PROGRAM's own arguments tell exec about the memory it will use,
 * read before it runs: llama.cpp's common arguments of llama-server and
 * llama-cli (-c/--ctx-size, or LLAMA_ARG_CTX_SIZE; an argument wins over
 * the variable, as in llama.cpp's common/arg.cpp). Other programs'
 * arguments mean something else and are not read.
 */
#include <stdlib.h>
#include <string.h>

#include "exec.h"

/* Whether argv0's file name is one of the programs whose common arguments exec reads. */
static bool reads_common_args(const char *argv0)
{
    const char *base = strrchr(argv0, '/');
    base = base ? base + 1 : argv0;
    return strncmp(base, "llama-server", 12) == 0 || strncmp(base, "llama-cli", 9) == 0;
}

/* A whole decimal number from 1 to 16777216 (llama.cpp's -c), else 0. */
static long long ctx_value(const char *v)
{
    char *end = NULL;
    long long x = v && v[0] ? strtoll(v, &end, 10) : 0;
    return end && !*end && x > 0 && x <= 16777216 ? x : 0;
}

long long exec_program_ctx_size(int argc, char **argv)
{
    if (argc < 1 || !reads_common_args(argv[0]))
        return 0;
    long long n = ctx_value(getenv("LLAMA_ARG_CTX_SIZE"));
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "-c") == 0 || strcmp(argv[i], "--ctx-size") == 0)
            n = ctx_value(argv[++i]);
    return n;
}
