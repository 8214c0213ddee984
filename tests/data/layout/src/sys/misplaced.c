/* Fixture (tests/layout): sys defines the function of a header kept in core's folder. */
#include "ramforge/core/fix_misplaced.h"

int fix_sys_misplaced(void)
{
    return 0;
}
