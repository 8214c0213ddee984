#!/usr/bin/env python3
"""ramforge exec end to end, the engine's edges (docs/EXEC.md): a libllama of another build.
The programs and helpers are test_exec.py's (exec_hold, ExecServer, metrics).
Usage: test_exec_engine.py --ramforge PATH --simple PATH --schema PATH CASE
"""
import os
import re

from test_exec import Ctx, rf_lines, run
from e2e_util import Skip, check, run_main  # noqa: E402 (test_exec's path)


def other_libllama(c, prog):
    """A copy of the libllama prog links (ldd), its GNU build ID changed (one byte flipped), in
    a folder of the case with its ggml beside it: (folder, built ID, other ID). As
    tests/install's other_llama makes it: no second llama.cpp build needed."""
    so = re.search(r"libllama\S* => (\S+)", run(["ldd", prog]).stdout)
    check(so, f"{prog} does not link libllama")
    so = os.path.realpath(so.group(1))
    note = run(["readelf", "-n", so]).stdout
    bid, soname = (re.search(r"Build ID: ([0-9a-f]+)", note),
                   re.search(r"\(SONAME\).*\[(.+)\]", run(["readelf", "-d", so]).stdout))
    check(bid and soname, f"{so}: no GNU build ID or SONAME")
    with open(so, "rb") as f:
        data = f.read()
    built = bytes.fromhex(bid.group(1))
    check(data.count(built) == 1, f"the build ID of {so} is not in the file once")
    other = built[:-1] + bytes([built[-1] ^ 0xFF])
    folder = c.path("other-llama")
    os.makedirs(folder)
    with open(os.path.join(folder, soname.group(1)), "wb") as f:
        f.write(data.replace(built, other))
    for name in os.listdir(os.path.dirname(so)):  # its ggml (RUNPATH $ORIGIN): the pin's
        if name.startswith("libggml") and ".so" in name:
            os.symlink(os.path.join(os.path.dirname(so), name), os.path.join(folder, name))
    return folder, built.hex(), other.hex()


def case_mismatched_llama(c):
    """A program whose loader finds another libllama build (a copy of the pin's with its
    build ID changed, first on LD_LIBRARY_PATH) is refused, naming both builds; through a
    script (not checked before it runs) the preload's own check at its load: one line, the
    model loaded unmanaged, no report."""
    prog = os.environ.get("RF_EXEC_OTHER", "")
    if not prog:
        raise Skip("exec_other_llama was not built")
    folder, built, other = other_libllama(c, prog)
    env = dict(os.environ, LD_LIBRARY_PATH=folder)
    check(run([prog], env=env).stdout == "ran\n", "exec_other_llama runs bare")
    check(f"{folder}/" in run(["ldd", prog], env=env).stdout, "the copy is not the one loaded")
    p = run(c.exec_argv() + [prog], env=env)
    lines = rf_lines(p.stderr)
    check(p.returncode == 1 and not p.stdout and len(lines) == 1, f"exit {p.returncode} {lines}")
    ids = re.findall(r"build ID ([0-9a-f]+)", lines[0])
    check(f"{folder}/libllama" in lines[0] and ids == [other, built],
          f"names both builds ({other}, {built}): {lines[0]}")
    script = c.path("other.sh")
    with open(script, "w") as f:
        f.write(f'#!/bin/sh\nexec {prog} "$@"\n')
    os.chmod(script, 0o755)
    p = run(c.exec_argv("--residency-report-json", c.path("r.json")) +
            [script, c.model("small")], env=env)
    lines = rf_lines(p.stderr)
    check(p.returncode == 0 and p.stdout == "loaded\n" and len(lines) == 1 and
          other in lines[0] and built in lines[0] and "not managed" in lines[0] and
          not os.path.exists(c.path("r.json")), f"the script: exit {p.returncode}, {lines}")


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}

if __name__ == "__main__":
    run_main(CASES, Ctx, "ramforge-exec-", schema_required=True)
