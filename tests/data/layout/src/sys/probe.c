/* Fixture (tests/layout): sys, including core's private header. */
#include "core/core_private.h"
#include "ramforge/fix_core.h"
#include "ramforge/sys/fix_sys.h"

int fix_sys_probe(void)
{
    return fix_core_sum(FIX_CORE_LIMIT, 1);
}
