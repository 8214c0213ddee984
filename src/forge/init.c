/* llama.cpp initialisation and log routing (the version string: llama_build.c). */
#include "forge_internal.h"

#include <pthread.h>
#include <string.h>

#include "ramforge/error.h"

#include "ggml-backend.h"
#include "llama.h"

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static bool log_verbose;

/* llama.cpp's lines end in '\n' and may come in pieces (CONT): pass them on trimmed. */
static void llama_log_cb(enum ggml_log_level level, const char *text, void *user_data)
{
    (void)user_data;
    if (!log_verbose)
        return;
    char buf[1024];
    size_t len = strlen(text);
    if (len >= sizeof(buf))
        len = sizeof(buf) - 1;
    memcpy(buf, text, len);
    while (len > 0 && buf[len - 1] == '\n')
        len--;
    buf[len] = '\0';
    if (len == 0)
        return;
    enum rf_log_level l = level == GGML_LOG_LEVEL_ERROR  ? RF_LOG_ERROR
                          : level == GGML_LOG_LEVEL_WARN ? RF_LOG_WARN
                                                         : RF_LOG_DEBUG;
    rf_log(l, "llama.cpp: %s", buf);
}

static void init_backend(void)
{
    llama_log_set(llama_log_cb, NULL);
    llama_backend_init();
    ggml_backend_load_all();
}

void forge_init(bool verbose)
{
    log_verbose = verbose;
    pthread_once(&init_once, init_backend);
}
