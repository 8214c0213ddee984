/* Fixture (tests/layout): a sys header (its function is defined in src/sys/) in core's folder. */
#ifndef FIX_MISPLACED_H
#define FIX_MISPLACED_H

int fix_sys_misplaced(void);

#endif
