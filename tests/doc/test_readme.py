#!/usr/bin/python3
"""Runs every command of README.md's ```sh blocks, so the README cannot drift.

Usage: test_readme.py --ramforge PATH --source DIR

Each ```sh block is a list of shell commands (a trailing backslash continues
a line; '#' starts a comment). Blocks tagged otherwise (```console for
sample output, ```c) are not run. Every command runs with bash in a fresh
directory laid out as the source tree the README speaks from: build/ramforge
is the binary under test, `ramforge` is on PATH, and every model the README
names under build/models/ is a small generated model of the same type (the
tinyllama ones are the `small` preset: same code paths, seconds instead of
minutes). A command must exit 0. The few that cannot run here are listed in
SKIP with the reason; a command using an option of PENDING (documented ahead
of its branch's merge) is skipped, with the reason, while --help lacks it.

Exit 0 pass, 1 fail, 77 skip.
"""
import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile

# (regular expression matched against the command, why it is not run here)
SKIP = [
    (r"^make (demo|check|build|install)\b",
     "builds the project (and make demo a 1.1 GiB model): make check is what runs this test"),
    (r"^cmake ", "configures a build tree"),
    (r"^(build/)?ramforge serve\b",
     "serves until stopped; tests/e2e/test_serve.py drives serve"),
    (r"^curl ", "talks to a running serve"),
    (r"^bench/(observer_bench\.sh|serve_idle\.py)\b",
     "a benchmark of several minutes (see its own header)"),
    (r"^(LLAMA_PREFIX=|export PKG_CONFIG_PATH=|cc embed\.c|build-embed/)",
     "builds and runs the example against an installed prefix: tests/install does"),
    (r"^RF_BENCH_DRIVER=", "a benchmark of several minutes (see its own header)"),
    (r"^bench/watch_cost\.py\b", "a benchmark of several minutes (see its own header)"),
    (r"^(make server-suite|tests/server_suite/run_suite\.py)\b",
     "llama.cpp's server test-suite: ctest server_suite_* runs its fast files"),
    (r"^(build/)?ramforge exec\b.*-- (\S*/)?llama-server\b",
     "serves until stopped; tests/preload and tests/server_suite drive exec"),
    (r"^python3 tests/preload/exec_figures\.py\b",
     "a benchmark of several minutes (see its own header)"),
]

# Models the README names -> (preset, type) generated for the test.
MODELS = {
    "tinyllama-q8_0.gguf": ("small", "q8_0"),
    "tinyllama-q4_0.gguf": ("small", "q4_0"),
    "small-q8_0.gguf": ("small", "q8_0"),
    "tiny-q8_0.gguf": ("tiny", "q8_0"),
}

# Options the README documents ahead of a branch not merged yet: a command using one is
# skipped (with the reason) while this build's --help lacks it. Any other option runs.
PENDING = {"--memory-limit": "inspect's fit check (branch svg)"}

# Paths outside the tree a README command writes to -> where the test writes instead.
REDIRECT = {"/var/lib/node_exporter/textfile/": "textfile/"}


def sh_blocks(text):
    """(line number, command) for every command in the README's ```sh blocks."""
    out, block, start, cmd, cmd_line = [], None, 0, "", 0
    for n, line in enumerate(text.splitlines(), 1):
        if block is None:
            m = re.match(r"^\s*```(\S*)\s*$", line)
            if m:
                block, start = m.group(1), n
            continue
        if re.match(r"^\s*```\s*$", line):
            if cmd:
                raise SystemExit(f"README.md:{cmd_line}: a continued line ends the block")
            block = None
            continue
        if block != "sh":
            continue
        s = line.strip()
        if not cmd and (not s or s.startswith("#")):
            continue
        if not cmd:
            cmd_line = n
        if s.endswith("\\"):
            cmd += s[:-1] + " "
            continue
        cmd += s
        out.append((cmd_line, cmd))
        cmd = ""
    if block is not None:
        raise SystemExit(f"README.md:{start}: unterminated ``` block")
    return out


def help_text(rf, cmd):
    return subprocess.run([rf, cmd, "--help"], capture_output=True, text=True).stdout


def missing_option(rf, command, helps):
    """An --option of a ramforge command that its --help does not name (or None)."""
    words = shlex.split(command)
    try:
        i = next(k for k, w in enumerate(words) if os.path.basename(w) == "ramforge")
    except StopIteration:
        return None
    if i + 1 >= len(words):
        return None
    sub = words[i + 1]
    if sub not in helps:
        helps[sub] = help_text(RF, sub)
    for w in words[i + 2:]:
        opt = w.split("=")[0]
        if opt in PENDING and not re.search(re.escape(opt) + r"\b", helps[sub]):
            return opt
    return None


RF = None


def main():
    global RF
    ap = argparse.ArgumentParser()
    ap.add_argument("--ramforge", required=True)
    ap.add_argument("--source", required=True)
    args = ap.parse_args()
    RF = os.path.abspath(args.ramforge)
    with open(os.path.join(args.source, "README.md"), encoding="utf-8") as f:
        commands = sh_blocks(f.read())
    if len(commands) < 10:
        print(f"FAIL: only {len(commands)} commands in README.md's ```sh blocks")
        return 1
    failures, ran, skipped, helps = [], 0, [], {}
    with tempfile.TemporaryDirectory(prefix="ramforge-readme-") as tmp:
        os.makedirs(os.path.join(tmp, "build", "models"))
        os.makedirs(os.path.join(tmp, "bin"))
        os.makedirs(os.path.join(tmp, "textfile"))
        os.symlink(RF, os.path.join(tmp, "build", "ramforge"))
        os.symlink(RF, os.path.join(tmp, "bin", "ramforge"))
        for d in ("schema", "tests"):  # the README's validator recipe, from the repo root
            os.symlink(os.path.abspath(os.path.join(args.source, d)), os.path.join(tmp, d))
        made = {}
        for name, (preset, wtype) in MODELS.items():
            if (preset, wtype) not in made:
                path = os.path.join(tmp, f"gen-{preset}-{wtype}.gguf")
                p = subprocess.run([RF, "mkmodel", "-P", preset, "-T", wtype, "-q", "-o", path],
                                   capture_output=True, text=True)
                if p.returncode != 0:
                    print(f"SKIP: cannot generate a {preset} {wtype} model: {p.stderr.strip()}")
                    return 77
                made[(preset, wtype)] = path
            os.symlink(made[(preset, wtype)], os.path.join(tmp, "build", "models", name))
        env = dict(os.environ, PATH=os.path.join(tmp, "bin") + os.pathsep + os.environ["PATH"])
        for line, command in commands:
            why = next((r for pat, r in SKIP if re.search(pat, command)), None)
            if why:
                skipped.append(f"README.md:{line}: {why}")
                continue
            opt = missing_option(RF, command, helps)
            if opt:
                skipped.append(f"README.md:{line}: this build has no {opt}: {PENDING[opt]}")
                continue
            for src, dst in REDIRECT.items():
                command = command.replace(src, dst)
            p = subprocess.run(["bash", "-c", command], cwd=tmp, env=env, capture_output=True,
                               text=True, timeout=600, stdin=subprocess.DEVNULL)
            ran += 1
            if p.returncode != 0:
                failures.append(f"README.md:{line}: `{command}` exited {p.returncode}:\n"
                                f"{p.stderr[-1500:]}")
            else:
                print(f"ok README.md:{line}: {command[:100]}")
    for s in skipped:
        print(f"skipped {s}")
    for f in failures:
        print(f"FAIL {f}")
    print(f"{ran} commands run, {len(failures)} failed, {len(skipped)} skipped")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
