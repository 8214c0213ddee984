/* Fixture (tests/layout): session, including ggml's, llama.cpp common's and a tools header. */
#include <chat.h>
#include <ggml.h>

#include "ramforge/fix_tool.h"
#include "ramforge/fix_types.h"

int fix_session_step(struct fix_pair p)
{
    return p.a + p.b + fix_tool_main();
}
