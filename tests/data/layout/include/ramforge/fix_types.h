/* Fixture (tests/layout): types only, over sys's: a sys header. */
#ifndef FIX_TYPES_H
#define FIX_TYPES_H

#include "ramforge/sys/fix_sys.h"

struct fix_pair {
    int a, b;
};

#endif
