/* Fixture (tests/layout): declares a function of tools. */
#ifndef FIX_TOOL_H
#define FIX_TOOL_H

int fix_tool_main(void);

#endif
