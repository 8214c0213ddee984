#!/usr/bin/env python3
"""No source file over the line limit (the team guide's 600 lines).

Every .c, .cpp and .h file under src/, tools/ and include/ of the tree ROOT is
counted; each one over MAX lines is printed as one line,
`file:MAX+1: N lines, over the limit of MAX (split it along its seams)`, the
line named being the first one past the limit. The exit status is 1 when a
file is over the limit, 0 when none is.
Usage: check_lines.py ROOT [--max MAX]   (MAX: default 600)
"""

import argparse
import os
import sys

SOURCE_SUFFIXES = (".c", ".cpp", ".h")
DIRS = ("src", "tools", "include")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root", help="the source tree (holding src/, tools/, include/)")
    ap.add_argument("--max", type=int, default=600, help="most lines a file may have")
    args = ap.parse_args()
    files = over = 0
    for top in DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(args.root, top)):
            dirnames.sort()
            for name in sorted(filenames):
                if not name.endswith(SOURCE_SUFFIXES):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, "rb") as f:
                    n = sum(1 for _ in f)
                files += 1
                if n > args.max:
                    over += 1
                    print("%s:%d: %d lines, over the limit of %d (split it along its seams)"
                          % (os.path.relpath(path, args.root), args.max + 1, n, args.max))
    print("check_lines: %d files, %d over %d lines" % (files, over, args.max), file=sys.stderr)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
