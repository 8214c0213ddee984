/* Fixture (tests/layout): core, including core only. */
#include "core_private.h"
#include "ramforge/fix_core.h"

int fix_core_sum(int a, int b)
{
    return a + b < FIX_CORE_LIMIT ? a + b : FIX_CORE_LIMIT;
}
