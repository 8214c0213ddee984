/* Fixture (tests/layout): core including sys headers (upward). */
#include "ramforge/fix_sys.h"
#include "ramforge/fix_types.h"

int fix_core_upward(void)
{
    return fix_sys_probe();
}
