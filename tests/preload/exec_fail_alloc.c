/*
 * The engine of ramforge exec linked again (libramforge-exec.so's objects,
 * src/preload) with -Wl,--wrap=reallocarray, for test_exec.py's
 * context_oom: only the engine's table of contexts calls reallocarray, and
 * with RF_TEST_FAIL_REALLOCARRAY in the environment every such call fails
 * with ENOMEM: the out-of-memory a context's record meets, on demand.
 */
#include <errno.h>
#include <stdlib.h>

void *__real_reallocarray(void *p, size_t n, size_t size);
void *__wrap_reallocarray(void *p, size_t n, size_t size);

void *__wrap_reallocarray(void *p, size_t n, size_t size)
{
    if (getenv("RF_TEST_FAIL_REALLOCARRAY")) {
        errno = ENOMEM;
        return NULL;
    }
    return __real_reallocarray(p, n, size);
}
