/* Fixture (tests/layout): core including sys headers (upward). */
#include "ramforge/fix_types.h"
#include "ramforge/sys/fix_sys.h"

int fix_core_upward(void)
{
    return fix_sys_probe();
}
