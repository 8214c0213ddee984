/* ramforge run: shared between the orchestration (cmd_run.c) and the printer (run_print.c). */
#ifndef RAMFORGE_TOOLS_RUN_H
#define RAMFORGE_TOOLS_RUN_H

#include "ramforge/report.h"

/* Prints the bounded human-readable report of r on stderr. */
void run_print_report(const struct rf_report *r);

#endif
