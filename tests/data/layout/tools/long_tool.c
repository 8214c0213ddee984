/* Fixture (tests/layout): a tool of 13 lines, over a limit of 12. */
#include "ramforge/fix_core.h"
#include "ramforge/fix_tool.h"

int fix_tool_main(void)
{
    int n = fix_core_sum(0, 1);

    n = fix_core_sum(n, 2);
    n = fix_core_sum(n, 3);
    n = fix_core_sum(n, 4);
    return n;
}
