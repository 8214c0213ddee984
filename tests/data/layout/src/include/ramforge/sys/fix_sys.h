/* Fixture (tests/layout): a sys header of the internal include dir. */
#ifndef FIX_SYS_H
#define FIX_SYS_H

int fix_sys_probe(void);

#endif
