/*
 * ramforge serve's worker (serve_worker.c, library ramforge_serve_worker):
 * the one thread that runs the jobs the HTTP front queues and the idle
 * boundary, wired by serve's main (cmd_serve.c).
 */
#ifndef RAMFORGE_TOOLS_SERVE_WORKER_H
#define RAMFORGE_TOOLS_SERVE_WORKER_H

#include "serve.h"

/*
 * Runs on the calling thread until sv->stopping: the queued jobs in order
 * (each through the session's boundaries, then answered), the idle
 * boundary when sv->idle says it is due; then answers what is still queued
 * 503. sv's session, model and locks are set up by the caller, and the
 * HTTP front is started (serve_http_start) before.
 */
void serve_worker_run(struct serve *sv);

/*
 * --prompt-cache: takes the kept context out of sv (NULL: none), to be
 * freed before a boundary that needs the model quiescent, when a request
 * asks for no cache, or at shutdown (the caller frees it).
 */
struct forge_context *serve_forget_prompt(struct serve *sv);

#endif
