/* Fixture: the HTTP front reaching into the worker (a violation). */
#include "serve_worker.h"
int serve_http_start(void)
{
    serve_worker_run();
    return 0;
}
