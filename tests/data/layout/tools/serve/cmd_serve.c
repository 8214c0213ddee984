/* Fixture: serve's main wires the worker (allowed). */
#include "serve_worker.h"
int cmd_serve(void)
{
    serve_worker_run();
    return 0;
}
