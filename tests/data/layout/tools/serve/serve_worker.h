/* Fixture: serve's worker header, a seam only serve's main and the worker include. */
void serve_worker_run(void);
