/* Fixture (tests/layout): forge, the one layer including llama.cpp. */
#include "llama.h"
#include "ramforge/sys/fix_sys.h"

int fix_forge_load(void)
{
    return fix_sys_probe();
}
