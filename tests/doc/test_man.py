#!/usr/bin/env python3
"""doc/ramforge.1 checked against the groff and mandoc formatters and the CLI's --help.

Usage: test_man.py --ramforge BIN CASE       (the page: doc/ramforge.1 of this tree)

  render   `man -l PAGE` (MANWIDTH=80), written to a file, has every section and
           every command's heading and no line over 80 columns
  lint     `groff -man -ww -z` and `mandoc -T lint -W style` report nothing
           (mandoc skipped, with the reason, when it is not installed)
  options  every option (short and long) that `ramforge [COMMAND] --help`
           prints is described in that command's section of the page, and
           every option the page describes there is one --help prints

Exit 0 pass, 1 fail, 77 skip.
"""
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from e2e_util import Skip, check, run_main  # noqa: E402

SOURCE = os.path.normpath(os.path.join(HERE, "..", ".."))
MAN_PAGE = os.path.join(SOURCE, "doc", "ramforge.1")
COMMANDS = ("run", "inspect", "mkmodel", "bench", "serve", "exec")
SECTIONS = ("NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "REPORT FIGURES", "EXIT STATUS",
            "ENVIRONMENT", "FILES", "SEE ALSO")
# An option as --help prints it: -x or --long-name, not inside a word.
OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][A-Za-z0-9-]*)")


class Ctx:
    def __init__(self, args, tmp):
        self.ramforge = args.ramforge
        self.tmp = tmp
        self.man = MAN_PAGE


def run(argv, env=None):
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)


def plain(roff):
    """The page's source as text: \\- as -, font and quote escapes removed."""
    text = roff.replace("\\-", "-").replace("\\e", "\\")
    text = re.sub(r"\\f[BIRP]", "", text)
    return re.sub(r"\\\((lq|rq|dq)", '"', text)


def sections_by_command(roff):
    """{"": global part, COMMAND: its .SS section} of the page's source."""
    parts, name = {"": []}, ""
    for line in roff.splitlines():
        m = re.match(r"\.S[HS] (.*)", line)
        if m:
            title = m.group(1).strip('"')
            cm = re.fullmatch(r"ramforge (\w+)", title)
            name = cm.group(1) if cm else ("" if line.startswith(".SH") else name)
        parts.setdefault(name, []).append(line)
    return {k: "\n".join(v) for k, v in parts.items()}


def described(section):
    """Options a section describes: those on the tag line of each .TP item."""
    lines = section.splitlines()
    tags = [lines[i + 1] for i, line in enumerate(lines[:-1]) if line.startswith(".TP")]
    found = set()
    for tag in tags:
        tag = plain(tag)
        if tag.startswith((".B", ".I")) and "-" in tag:
            found |= {o for o in OPTION.findall(tag) if not re.fullmatch(r"-\d.*", o)}
    return found


def help_options(ramforge, cmd):
    """The options a --help prints in its option list: lines "  -x, --long ARG" or
    "      --long ARG" (a continuation line is indented further)."""
    argv = [ramforge] + ([cmd] if cmd else []) + ["--help"]
    p = run(argv)
    check(p.returncode == 0, f"{' '.join(argv)} exited {p.returncode}: {p.stderr}")
    opts = set()
    for line in p.stdout.splitlines():
        m = re.match(r"(?:  (-\w(?:, --[\w-]+)?)|      (--[\w-]+))(?:\s|$)", line)
        if m:
            opts |= set(OPTION.findall(m.group(1) or m.group(2)))
    check(opts, f"{' '.join(argv)} prints no options: {p.stdout[:200]!r}")
    return opts


def case_render(c):
    env = dict(os.environ, MANWIDTH="80", MAN_KEEP_FORMATTING="", LC_ALL="C.UTF-8")
    p = run(["man", "-l", c.man], env=env)
    check(p.returncode == 0, f"man -l {c.man} exited {p.returncode}: {p.stderr}")
    text = p.stdout
    out = os.path.join(c.tmp, "ramforge.1.txt")
    with open(out, "w") as f:
        f.write(text)
    for s in SECTIONS:
        check(re.search(rf"^{s}$", text, re.M), f"rendered page has no {s} section ({out})")
    for c in COMMANDS:
        check(re.search(rf"^   ramforge {c}$", text, re.M), f"rendered page has no 'ramforge {c}'")
    long_lines = [line for line in text.splitlines() if len(line) > 80]
    check(not long_lines, f"lines over 80 columns: {long_lines[:3]}")
    print(f"rendered {len(text.splitlines())} lines to {out}")


def case_lint(c):
    p = run(["groff", "-man", "-Tutf8", "-ww", "-z", c.man])
    check(p.returncode == 0 and not p.stderr.strip(), f"groff -ww: {p.returncode} {p.stderr}")
    if not shutil.which("mandoc"):
        raise Skip("groff -ww passed; mandoc is not installed (Debian mandoc, "
                   "scripts/install-deps.sh)")
    p = run(["mandoc", "-T", "lint", "-W", "style", c.man])
    check(p.returncode == 0 and not p.stdout.strip() and not p.stderr.strip(),
          f"mandoc -T lint: {p.returncode} {p.stdout}{p.stderr}")
    print("groff -ww and mandoc -T lint: no warnings")


def case_options(c):
    with open(c.man) as f:
        roff = f.read()
    parts = sections_by_command(roff)
    total = 0
    for cmd in ("",) + COMMANDS:
        label = f"ramforge {cmd}".strip()
        check(cmd in parts, f"the page has no section for {label}")
        printed = help_options(c.ramforge, cmd)
        page = described(parts[cmd])
        check(printed <= page, f"{label} --help prints options the page does not describe "
                               f"there: {sorted(printed - page)}")
        check(page <= printed, f"the page describes options {label} --help does not print: "
                               f"{sorted(page - printed)}")
        total += len(printed)
        print(f"{label}: {len(printed)} options, all described")
    print(f"{total} options")


CASES = {"render": case_render, "lint": case_lint, "options": case_options}

if __name__ == "__main__":
    run_main(CASES, Ctx, "test-man-")
