/* Fixture: the worker includes its own header (allowed). */
#include "serve_worker.h"
void serve_worker_run(void)
{
}
