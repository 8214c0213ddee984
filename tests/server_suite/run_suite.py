#!/usr/bin/python3
"""Runs llama.cpp's own server test-suite (tools/server/tests of the pinned source, kept
in the llama.cpp cache by scripts/build-llama.sh) offline, on a generated model, against
llama-server in one or more modes (server_wrapper.py: bare, exec, serve), and prints each
mode's counts: passed, failed, skipped, and the tests deselected because they call the
OpenAI Python client (not packaged). Then, for every mode but bare, the tests that pass
bare and not under that mode; with --expect FILE, the tests of FILE that do not pass.

Exit status: 0 when every mode ran and every expectation (--expect, --same-as-bare) held,
1 when one did not, 2 on bad usage, 77 (skipped) when something the suite needs is
missing (llama-server not built, Debian's pytest not installed, `ramforge exec` absent
for the exec mode), with the reason on stderr.

  run_suite.py --ramforge build/ramforge --prefix /var/cache/ramforge/llama-... \\
               --work build/server_suite --files fast --mode bare --mode exec --same-as-bare
"""
import argparse
import os
import shutil
import socket
import subprocess
import sys
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3"  # Debian's, with python3-pytest & co.; not a pyenv one on PATH
FAST = ["test_basic.py", "test_tokenize.py", "test_completion.py", "test_metrics.py",
        "test_sleep.py", "test_security.py"]
MODES = ("bare", "exec", "serve")
SKIP = 77


def skip(reason):
    print(f"run_suite: skipped: {reason}", file=sys.stderr)
    sys.exit(SKIP)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ramforge", required=True, help="the ramforge binary")
    p.add_argument("--prefix", required=True,
                   help="llama.cpp's cache prefix (bin/llama-server, share/ramforge/server-tests)")
    p.add_argument("--work", required=True, help="folder for the suite's copies, logs, model")
    p.add_argument("--model", help="GGUF model (default: generated, see --preset)")
    p.add_argument("--preset", default="small", help="mkmodel preset (default small)")
    p.add_argument("--type", default="q8_0", help="mkmodel weight type (default q8_0)")
    p.add_argument("--files", default="fast",
                   help="'fast' (%s), 'all', or comma-separated file names" % ", ".join(FAST))
    p.add_argument("--mode", action="append", choices=MODES,
                   help="a mode to run (repeatable; default bare)")
    p.add_argument("--exec-opts", default="", help="ramforge exec's options (exec mode)")
    p.add_argument("--serve-drop", default="--parallel",
                   help="comma-separated llama-server flags the serve mode drops instead of "
                        "refusing the start (default: --parallel, serve has one slot; '' drops "
                        "none; named in the counts)")
    p.add_argument("--same-as-bare", action="store_true",
                   help="fail unless every test that passes bare passes in each other mode "
                        "(runs bare too)")
    p.add_argument("--expect", help="file of test ids that must pass in every mode run")
    p.add_argument("--write-expect", help="write the ids that passed bare to this file")
    p.add_argument("-k", dest="keyword", help="pytest's -k: only the tests this expression selects")
    p.add_argument("--timeout", type=int, default=3600, help="seconds per mode (default 3600)")
    a = p.parse_args()
    a.mode = a.mode or ["bare"]
    if (a.same_as_bare or a.write_expect) and "bare" not in a.mode:
        a.mode.insert(0, "bare")
    return a


def check_prerequisites(a):
    server = os.path.join(a.prefix, "bin", "llama-server")
    suite = os.path.join(a.prefix, "share", "ramforge", "server-tests")
    if not os.access(server, os.X_OK):
        skip(f"{server} is not built (scripts/build-llama-server.sh)")
    if not os.path.isdir(os.path.join(suite, "unit")):
        skip(f"{suite} is missing (scripts/build-llama-server.sh copies it)")
    mods = "import pytest, requests, wget, filelock, prometheus_client"
    if subprocess.run([PYTHON, "-c", mods], capture_output=True).returncode != 0:
        skip(f"{PYTHON} lacks python3-pytest, -requests, -wget, -filelock or "
             "-prometheus-client (scripts/install-deps.sh)")
    p = subprocess.run(["ldd", a.ramforge], capture_output=True, text=True)
    if "libasan" in p.stdout:
        skip("an AddressSanitizer build (make asan): llama-server is not instrumented, so "
             "exec cannot preload this build into it, and bare mode does not run ramforge; "
             "the plain build's ctest runs the suite")
    return server, suite


def test_files(a, suite):
    unit = os.path.join(suite, "unit")
    if a.files == "fast":
        return FAST
    if a.files == "all":
        return sorted(f for f in os.listdir(unit) if f.startswith("test_") and f.endswith(".py"))
    files = a.files.split(",")
    for f in files:
        if not os.path.isfile(os.path.join(unit, f)):
            print(f"run_suite: --files: no {f} in {unit}", file=sys.stderr)
            sys.exit(2)
    return files


def model_path(a):
    if a.model:
        if not os.path.isfile(a.model):
            print(f"run_suite: --model: no such file {a.model}", file=sys.stderr)
            sys.exit(2)
        return os.path.abspath(a.model)
    path = os.path.join(os.path.abspath(a.work), f"{a.preset}-{a.type}.gguf")
    if not os.path.isfile(path):
        tmp = path + ".tmp"
        p = subprocess.run([a.ramforge, "mkmodel", "--preset", a.preset, "--type", a.type,
                            "--seed", "42", "-o", tmp], capture_output=True, text=True)
        if p.returncode != 0:
            print(f"run_suite: mkmodel failed: {p.stderr.strip()}", file=sys.stderr)
            sys.exit(1)
        os.replace(tmp, path)
    return path


def outcomes(junit):
    """{test id: 'passed'|'failed'|'skipped'} from pytest's JUnit XML."""
    res = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        if not case.get("name"):  # the empty entry of an interrupted run
            continue
        tid = case.get("classname", "").replace(".", "/") + ".py::" + case.get("name", "")
        tags = {child.tag for child in case}
        if tags & {"failure", "error"}:
            res[tid] = "failed"
        elif "skipped" in tags:
            res[tid] = "skipped"
        else:
            res[tid] = "passed"
    return res


def run_mode(a, mode, server, suite, files, model):
    """Runs the files in a fresh copy of the suite; returns (outcomes, deselected ids,
    refusal lines of the wrapper)."""
    d = os.path.join(os.path.abspath(a.work), mode)
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(suite, d)
    junit = os.path.join(d, "junit.xml")
    desel = os.path.join(d, "deselected.txt")
    refusals = os.path.join(d, "refusals.txt")
    stub = os.path.join(HERE, "openai_stub")
    has_openai = subprocess.run([PYTHON, "-c", "import openai"], capture_output=True)
    env = dict(os.environ,
               PYTHONPATH=os.pathsep.join([HERE] + ([] if has_openai.returncode == 0 else
                                                    [stub])),
               PORT=str(free_port()), LLAMA_CACHE=os.path.join(d, "tmp"),
               LLAMA_SERVER_BIN_PATH=os.path.join(HERE, "server_wrapper.py"),
               RAMFORGE_SUITE_MODE=mode, RAMFORGE_SUITE_MODEL=model,
               RAMFORGE_SUITE_LLAMA_SERVER=server,
               RAMFORGE_SUITE_RAMFORGE=os.path.abspath(a.ramforge),
               RAMFORGE_SUITE_EXEC_OPTS=a.exec_opts, RAMFORGE_SUITE_SERVE_DROP=a.serve_drop,
               RAMFORGE_SUITE_REFUSALS=refusals,
               RAMFORGE_SUITE_DESELECTED=desel)
    for k in ("DEBUG", "DEBUG_EXTERNAL", "SLOW_TESTS", "N_GPU_LAYERS"):
        env.pop(k, None)
    argv = [PYTHON, "-m", "pytest", "-p", "suite_plugin", "-p", "no:cacheprovider", "-q",
            "-rN", f"--junitxml={junit}"] + (["-k", a.keyword] if a.keyword else []) + [os.path.join("unit", f) for f in files]
    with open(os.path.join(d, "pytest.log"), "w") as log:
        try:
            p = subprocess.run(argv, cwd=d, env=env, stdout=log, stderr=subprocess.STDOUT,
                               timeout=a.timeout)
        except subprocess.TimeoutExpired:
            print(f"run_suite: {mode}: pytest did not finish in {a.timeout} s "
                  f"({d}/pytest.log)", file=sys.stderr)
            return None, [], []
    if p.returncode not in (0, 1) or not os.path.isfile(junit):
        print(f"run_suite: {mode}: pytest exited {p.returncode} ({d}/pytest.log)",
              file=sys.stderr)
        return None, [], []

    def lines(path):
        return open(path).read().split("\n")[:-1] if os.path.isfile(path) else []

    return outcomes(junit), lines(desel), lines(refusals)


def summary(a, mode, res, desel, refusals):
    n = {k: sum(1 for v in res.values() if v == k) for k in ("passed", "failed", "skipped")}
    total = len(res) + len(desel)
    print(f"{mode:6} {n['passed']:4d} passed {n['failed']:4d} failed {n['skipped']:4d} skipped "
          f"{len(desel):4d} deselected (OpenAI client) of {total}")
    if mode == "serve" and a.serve_drop:
        print(f"       llama-server flags dropped (--serve-drop): {a.serve_drop}")
    counted = {}
    for r in refusals:
        counted[r] = counted.get(r, 0) + 1
    for r, k in sorted(counted.items()):
        print(f"       {k} server start(s) refused: {r}")


def missing(must, res, what):
    """The ids of must that did not pass in res, printed under what; their count."""
    bad = sorted(t for t in must if res.get(t) != "passed")
    if bad:
        print(f"{what}: {len(bad)}")
        for t in bad:
            print(f"  {t}: {res.get(t, 'not run')}")
    return len(bad)


def main():
    a = parse_args()
    server, suite = check_prerequisites(a)
    files = test_files(a, suite)
    os.makedirs(a.work, exist_ok=True)
    model = model_path(a)
    print(f"run_suite: {len(files)} file(s), model {model}, llama-server {server}")
    results, bad = {}, 0
    for mode in a.mode:
        res, desel, refusals = run_mode(a, mode, server, suite, files, model)
        if res is None:
            bad += 1
            continue
        results[mode] = res
        summary(a, mode, res, desel, refusals)
    bare = results.get("bare")
    if a.write_expect and bare is not None:
        passed = sorted(t for t, v in bare.items() if v == "passed")
        with open(a.write_expect, "w") as f:
            f.write(f"# The tests of {a.files} that pass on the pinned llama-server, bare, "
                    f"with {os.path.basename(model)}:\n# {len(passed)} of {len(bare)} run. "
                    f"Remade by run_suite.py ... --files {a.files} --write-expect FILE\n")
            f.writelines(t + "\n" for t in passed)
    if a.expect:
        must = [t for t in open(a.expect).read().split("\n") if t and not t.startswith("#")]
        for mode, res in results.items():
            bad += missing(must, res, f"{mode}: expected to pass ({a.expect}), did not")
    if bare is not None:
        passed = [t for t, v in bare.items() if v == "passed"]
        for mode, res in results.items():
            if mode != "bare":
                n = missing(passed, res, f"{mode}: pass bare, not under {mode}")
                if a.same_as_bare:
                    bad += n
                elif not n:
                    print(f"{mode}: every test that passes bare passes")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
