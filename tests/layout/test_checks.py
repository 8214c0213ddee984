#!/usr/bin/env python3
"""The layout checks can fail: each run on the fixture tree tests/data/layout,
which breaks each rule once or twice (an upward include, through a header of
the internal include dir src/include/ and through a header of types only; a
session file including a header of tools; ggml and llama.cpp's common outside forge; an
internal header in another layer's folder and one outside any; another
layer's private header; serve's HTTP front including its worker's header; a file over
the limit) and keeps it elsewhere, must
print exactly those violations and exit 1 (exit 0 under a limit it keeps).
Usage: test_checks.py CHECKS_DIR FIXTURE_DIR
"""

import subprocess
import sys

# What the fixture breaks, one line each, as the checks print them.
LAYERS_EXPECTED = [
    "src/include/ramforge/core/fix_misplaced.h:1: a sys header in ramforge/core/: internal "
    "headers live in their layer's folder (ramforge/sys/)",
    "src/include/ramforge/fix_flat.h:1: an internal header outside a layer's folder: move it "
    "to ramforge/core/",
    # a header of types only, over a sys header: sys's
    'src/core/upward.c:2: core includes "ramforge/fix_types.h" of sys, a layer above it: '
    "core includes only core",
    'src/core/upward.c:3: core includes "ramforge/sys/fix_sys.h" of sys, a layer above it: '
    "core includes only core",
    "src/session/step.c:2: session includes llama.cpp's <chat.h>: only src/forge/ includes "
    "llama.cpp, ggml and gguf headers",
    "src/session/step.c:3: session includes llama.cpp's <ggml.h>: only src/forge/ includes "
    "llama.cpp, ggml and gguf headers",
    # a header declaring a function defined in tools/: tools's
    'src/session/step.c:5: session includes "ramforge/fix_tool.h" of tools, a layer above it: '
    "session includes only core, sys, forge, session",
    'src/sys/probe.c:2: sys includes "core/core_private.h", a private header of core '
    "(src/core/core_private.h): only core includes it",
    # serve's HTTP front including the worker's header (cmd_serve.c, the main, may)
    "tools/serve/serve_http.c:2: includes tools/serve/serve_worker.h: only "
    "tools/serve/cmd_serve.c, tools/serve/serve_worker.c include it",
]
LINES_EXPECTED = [
    "tools/long_tool.c:13: 13 lines, over the limit of 12 (split it along its seams)",
]


def run(args):
    p = subprocess.run([sys.executable] + args, stdout=subprocess.PIPE, text=True)
    return p.returncode, p.stdout.splitlines()


def expect(what, got, rc, lines):
    grc, glines = got
    if grc != rc or glines != lines:
        print("FAIL: %s: exit %d, printed:\n  %s\nexpected exit %d and:\n  %s"
              % (what, grc, "\n  ".join(glines), rc, "\n  ".join(lines)))
        return 1
    print("ok: %s: exit %d, %d violations as expected" % (what, grc, len(glines)))
    return 0


def main():
    checks, fixture = sys.argv[1], sys.argv[2]
    failures = 0
    failures += expect("check_layers on the fixture",
                       run([checks + "/check_layers.py", fixture]), 1, LAYERS_EXPECTED)
    failures += expect("check_lines --max 12 on the fixture",
                       run([checks + "/check_lines.py", fixture, "--max", "12"]), 1,
                       LINES_EXPECTED)
    failures += expect("check_lines --max 13 on the fixture",
                       run([checks + "/check_lines.py", fixture, "--max", "13"]), 0, [])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
