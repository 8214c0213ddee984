/*
 * What PROGRAM's own arguments tell exec about the memory it will use,
 * read before it runs: llama.cpp's common arguments of llama-server and
 * llama-cli (-c/--ctx-size, or LLAMA_ARG_CTX_SIZE; llama-server's
 * -cram/--cache-ram, or LLAMA_ARG_CACHE_RAM; -ctk/-ctv, the KV cache's types;
 * an argument wins over the variable, as in llama.cpp's common/arg.cpp). Other programs' arguments
 * mean something else and are not read.
 */
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "ramforge/core/kv_types.h"

bool exec_program_is(const char *argv0, const char *name)
{
    const char *base = strrchr(argv0, '/');
    base = base ? base + 1 : argv0;
    return strncmp(base, name, strlen(name)) == 0;
}

const char *exec_program_arg(int argc, char **argv, const char *shrt, const char *lng,
                             const char *env)
{
    const char *v = getenv(env);
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], shrt) == 0 || strcmp(argv[i], lng) == 0)
            v = argv[++i];
    return v && v[0] ? v : NULL;
}

/* v as a whole decimal number from min to max, else false. */
static bool whole(const char *v, long long min, long long max, long long *out)
{
    char *end = NULL;
    long long x = strtoll(v, &end, 10);
    if (!end || *end || x < min || x > max)
        return false;
    *out = x;
    return true;
}

long long exec_program_ctx_size(int argc, char **argv)
{
    long long n = 0;
    if (argc < 1 ||
        !(exec_program_is(argv[0], "llama-server") || exec_program_is(argv[0], "llama-cli")))
        return 0;
    const char *v = exec_program_arg(argc, argv, "-c", "--ctx-size", "LLAMA_ARG_CTX_SIZE");
    return v && whole(v, 1, 16777216, &n) ? n : 0;
}

void exec_program_cache_types(int argc, char **argv, struct rf_operation_request *req)
{
    uint32_t k = RF_KV_TYPE_F16, v = RF_KV_TYPE_F16;
    if (argc < 1 ||
        !(exec_program_is(argv[0], "llama-server") || exec_program_is(argv[0], "llama-cli")))
        return;
    const char *kn =
        exec_program_arg(argc, argv, "-ctk", "--cache-type-k", "LLAMA_ARG_CACHE_TYPE_K");
    const char *vn =
        exec_program_arg(argc, argv, "-ctv", "--cache-type-v", "LLAMA_ARG_CACHE_TYPE_V");
    if ((kn && rf_kv_type_of_name(kn, &k) < 0) || (vn && rf_kv_type_of_name(vn, &v) < 0))
        return;
    req->has_cache_types = true;
    req->type_k = k;
    req->type_v = v;
}

bool exec_program_cache_ram(int argc, char **argv, long long *mib)
{
    if (argc < 1 || !exec_program_is(argv[0], "llama-server"))
        return false;
    const char *v = exec_program_arg(argc, argv, "-cram", "--cache-ram", "LLAMA_ARG_CACHE_RAM");
    *mib = EXEC_SERVER_CACHE_RAM_DEFAULT_MIB;
    return !v || (whole(v, -1, (long long)1 << 40, mib) && *mib >= 0);
}
