/* Fixture (tests/layout): a core header of the installed dir. */
#ifndef FIX_CORE_H
#define FIX_CORE_H

int fix_core_sum(int a, int b);

#endif
