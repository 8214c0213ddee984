#!/usr/bin/python3
"""The README and the user guide checked against the CLI (issue 37).

Usage: [RF_LLAMA_SERVER=PATH] test_doc_commands.py --ramforge PATH CASE   (this tree's pages)

  commands  every command of the ```sh blocks of README.md and docs/guide/*.md runs as
            printed and exits 0. A page's commands run in order in one bash, as a reader
            types them into one shell (its variables, `cd` and `&` jobs carry over; `kill $!`
            stops the server the page started last), in a fresh directory laid out as the source
            tree: build/ramforge is the binary under test (also `ramforge` on PATH),
            build/llama-server the pinned llama-server (RF_LLAMA_SERVER), and schema/, tests/,
            bench/, scripts/, examples/ and docs/ the tree's own. The placeholders:
            - build/models/tinyllama-q8_0.gguf, the model `make demo` makes, is a `small`
              Q8_0 model (same code paths, seconds instead of minutes), and `mkmodel
              -P tinyllama` makes a `small` one; any other model a command names must be
              made by an earlier command of the same page, as a reader would have to;
            - ports 8080 and 9464 are free ports picked for the run (other tests listen too);
            - /var/lib/node_exporter/textfile is textfile in the run's directory, which
              nothing creates before the page's own commands.
            A command ending in `&` (a server) must be one simple command: it becomes the
            shell's last job ($!). Blocks tagged otherwise (```console for sample output,
            ```c, ```text) are not run.
            SKIP lists the commands that cannot run here, with the reason; commands that
            need root (--memory-limit, cgroups, dd iflag=nocache) skip without it, those
            naming build/llama-server without RF_LLAMA_SERVER, and exec's and llama-server's
            in an ASan build (make asan).
  options   every option `ramforge COMMAND --help` prints is documented on its command's
            page, docs/guide/COMMAND.md (test_man.py `options` checks the man page); the
            failure names each missing option and where to add it.

Exit 0 pass, 1 fail, 77 skip.
"""
import os
import re
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
sys.path.insert(0, HERE)
from e2e_util import Skip, asan_build, check, run_main  # noqa: E402
from test_man import COMMANDS, OPTION, help_options  # noqa: E402

SOURCE = os.path.normpath(os.path.join(HERE, "..", ".."))
GUIDE = os.path.join("docs", "guide")

# (regular expression matched against the command, why it is not run here)
SKIP = [
    (r"^make (demo|check|build|install|package|llama-server|server-suite)\b",
     "builds the project: make check is what runs this test (make llama-server: "
     "RF_LLAMA_SERVER stands for it)"),
    (r"^dpkg-deb -I build/", "reads the package make package builds: tests/install checks it"),
    (r"^(dpkg -i|apt-get install) ",
     "installs the package on this machine: tests/install (install_package) installs it "
     "into a fresh root"),
    (r"^cmake ", "configures a build tree"),
    (r"^(LLAMA_PREFIX=|export PKG_CONFIG_PATH=|cc embed\.c|build-embed/)",
     "builds and runs the example against an installed prefix: tests/install does"),
    (r"^(RF_BENCH_DRIVER=\S+ )?bench/(observer_bench\.sh|serve_idle\.py|watch_cost\.py|"
     r"profile_wakeup\.py|load_peak\.py|streaming_curve\.sh|streaming_hosts\.py|"
     r"admission_sweep\.py|admission_cases\.sh|simple_parity\.sh|moe_curve\.py)\b|^POLICIES=|^R=\d",
     "a benchmark of several minutes (see its own header)"),
    (r"^scripts/measure-streaming\.sh\b", "a benchmark of several minutes (see its header)"),
    (r"^(make server-suite|tests/server_suite/run_suite\.py)\b",
     "llama.cpp's server test-suite: ctest server_suite_* runs its fast files"),
    (r"^python3 tests/preload/exec_figures\.py\b",
     "a benchmark of several minutes (see its own header)"),
    (r"^(build/)?ramforge serve\b(?!.*&$)", "serves until stopped, not started with &"),
    (r"^(build/)?ramforge exec\b.*llama-server\b(?!.*&$)",
     "serves until stopped, not started with &"),
    (r"^rsvg-convert -o docs/", "writes into the source tree"),
]
# Commands that need root here (a cgroup of their own, dropping a file's cached pages).
ROOT = re.compile(r"--memory-limit|/sys/fs/cgroup|iflag=nocache|systemd-run")
PORTS = ("8080", "9464")
REDIRECT = {"/var/lib/node_exporter/textfile": "textfile"}
DEMO_MODEL = "build/models/tinyllama-q8_0.gguf"
PAGE_TIMEOUT = 900  # seconds for one page's commands


class Ctx:
    def __init__(self, args, tmp):
        self.ramforge = os.path.abspath(args.ramforge)
        server = os.environ.get("RF_LLAMA_SERVER", "")
        self.server = server if os.access(server, os.X_OK) else None
        self.asan = asan_build(self.ramforge)
        self.tmp = tmp


def pages():
    """README.md, then the guide's pages, relative to the tree."""
    names = sorted(n for n in os.listdir(os.path.join(SOURCE, GUIDE)) if n.endswith(".md"))
    return ["README.md"] + [os.path.join(GUIDE, n) for n in names]


def sh_commands(page, text):
    """(line number, command) for every command of the page's ```sh blocks: a trailing
    backslash continues a line, a line starting with '#' is a comment."""
    out, block, start, cmd, cmd_line = [], None, 0, "", 0
    for n, line in enumerate(text.splitlines(), 1):
        if block is None:
            m = re.match(r"^\s*```(\S*)\s*$", line)
            if m:
                block, start = m.group(1), n
            continue
        if re.match(r"^\s*```\s*$", line):
            check(not cmd, f"{page}:{cmd_line}: a continued line ends the block")
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
            cmd += s[:-1].rstrip() + " "
            continue
        out.append((cmd_line, cmd + s))
        cmd = ""
    check(block is None, f"{page}:{start}: unterminated ``` block")
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def placeholders(command, ports):
    """The command with the placeholders of the header substituted."""
    command = re.sub(r"(-P|--preset)(\s+|=)tinyllama\b", r"\1\2small", command)
    for port, free in ports.items():
        command = re.sub(rf"(?<![\d.]){port}(?!\d)", free, command)
    for src, dst in REDIRECT.items():
        command = command.replace(src, dst)
    return command


def tree(c, tmp):
    """A directory laid out as the source tree after `make demo` (and make llama-server)."""
    os.makedirs(os.path.join(tmp, "build", "models"))
    os.makedirs(os.path.join(tmp, "bin"))
    os.symlink(c.ramforge, os.path.join(tmp, "build", "ramforge"))
    os.symlink(c.ramforge, os.path.join(tmp, "bin", "ramforge"))
    if c.server:
        os.symlink(c.server, os.path.join(tmp, "build", "llama-server"))
    for d in ("schema", "tests", "bench", "scripts", "examples", "docs", "doc"):
        os.symlink(os.path.join(SOURCE, d), os.path.join(tmp, d))
    p = subprocess.run([c.ramforge, "mkmodel", "-P", "small", "-T", "q8_0", "-q", "-o",
                        os.path.join(tmp, DEMO_MODEL)], capture_output=True, text=True)
    if p.returncode != 0:
        raise Skip(f"cannot generate the demo model's placeholder: {p.stderr.strip()}")


def skip_reason(c, command):
    why = next((r for pat, r in SKIP if re.search(pat, command)), None)
    if why:
        return why
    if ROOT.search(command) and os.geteuid() != 0:
        return "needs root here (a memory cgroup of its own, or dropping cached pages)"
    if "build/llama-server" in command and not c.server:
        return "no llama-server (make llama-server builds it)"
    if c.asan and re.search(r"\bramforge exec\b|build/llama-server", command):
        return ("an ASan build (make asan): its runtime cannot be preloaded into a program "
                "that is not instrumented, as tests/preload skip")
    return None


def run_page(c, page):
    """Runs the page's commands in one bash; returns (ran, failures, skipped)."""
    with open(os.path.join(SOURCE, page), encoding="utf-8") as f:
        commands = sh_commands(page, f.read())
    tmp = tempfile.mkdtemp(prefix="page-", dir=c.tmp)
    tree(c, tmp)
    ports = {p: free_port() for p in PORTS}
    script, ran, skipped = ["set +e", "exec 3>status"], [], []
    server_skipped = None  # the line of a server (&) not started: what talks to it waits too
    writes = {}  # a file a server not started would have written (a report): its line
    for line, command in commands:
        why = skip_reason(c, command)
        if not why and server_skipped:
            why = f"talks to the server of line {server_skipped}, not started"
        read = next((f for f in writes if re.search(rf"(^|[\s/]){re.escape(f)}\b", command)), None)
        if not why and read:
            why = f"reads {read}, which the server of line {writes[read]} (not started) writes"
        if re.search(r"[^&]&$", command):
            server_skipped = line if why else None
            if why:
                writes.update((os.path.basename(f), line)
                              for f in re.findall(r"[\w./-]+\.(?:json|prom)\b", command))
        if command == "kill $!":
            server_skipped = None
        if why:
            skipped.append(f"{page}:{line}: {why}")
            continue
        k = len(ran)
        ran.append((line, command))
        script.append(f"echo start {k} >&3")
        command = placeholders(command, ports)
        if re.search(r"[^&]&$", command):  # the shell's job: `kill $!` stops it
            script.append(f"{command[:-1]} >out.{k} 2>err.{k} </dev/null &")
        else:
            script.append(f"{{ {command}\n}} >out.{k} 2>err.{k} </dev/null")
        script.append(f"echo end {k} $? >&3")
    # Servers the page stopped get 10 s to end (a second SIGTERM would be a second Ctrl-C,
    # which llama-server answers with exit()); one it did not stop gets SIGTERM and 10 s more,
    # then SIGKILL.
    settle = "for i in $(seq 100); do [ -z \"$(jobs -pr)\" ] && break; sleep 0.1; done"
    script += [settle, "kill $(jobs -pr) 2>/dev/null", settle,
               "[ -z \"$(jobs -pr)\" ] || { echo left $(jobs -pr) >&3; kill -9 $(jobs -pr); }",
               "wait"]
    status = os.path.join(tmp, "status")
    env = dict(os.environ, PATH=os.path.join(tmp, "bin") + os.pathsep + os.environ["PATH"])
    timed_out = False
    p = subprocess.Popen(["bash", "-c", "\n".join(script)], cwd=tmp, env=env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        p.wait(timeout=PAGE_TIMEOUT)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(p.pid, 9)
        p.wait()
    ends, started = {}, -1
    with open(status) as f:
        for rec in f.read().split("\n"):
            w = rec.split()
            if len(w) == 2 and w[0] == "start":
                started = int(w[1])
            elif len(w) == 3 and w[0] == "end":
                ends[int(w[1])] = int(w[2])
            elif w and w[0] == "left":
                print(f"note {page}: killed with SIGKILL, still running 20 s after the page's "
                      f"end: {' '.join(w[1:])}")
    failures = []
    for k, (line, command) in enumerate(ran):
        rc = ends.get(k)
        if rc == 0:
            print(f"ok {page}:{line}: {command[:100]}")
            continue
        err = ""
        if os.path.exists(os.path.join(tmp, f"err.{k}")):
            with open(os.path.join(tmp, f"err.{k}"), errors="replace") as f:
                err = f.read()[-1500:]
        what = (f"did not end within {PAGE_TIMEOUT} s" if timed_out and k == started
                else "did not run" if rc is None else f"exited {rc}")
        failures.append(f"{page}:{line}: `{command}` {what}:\n{err}")
    return len(ran), failures, skipped


def case_commands(c):
    total, failures, skipped = 0, [], []
    for page in pages():
        n, f, s = run_page(c, page)
        total, failures, skipped = total + n, failures + f, skipped + s
    for s in skipped:
        print(f"skipped {s}")
    for f in failures:
        print(f"FAIL {f}")
    print(f"{total} commands run, {len(failures)} failed, {len(skipped)} skipped")
    check(total >= 40, f"only {total} commands ran")
    check(not failures, f"{len(failures)} commands failed (above)")


def case_options(c):
    missing = []
    for cmd in COMMANDS:
        page = os.path.join(GUIDE, f"{cmd}.md")
        path = os.path.join(SOURCE, page)
        check(os.path.exists(path), f"{page} is missing: every command has its page")
        with open(path, encoding="utf-8") as f:
            text = f.read()
        found = set(OPTION.findall(text))
        for opt in sorted(help_options(c.ramforge, cmd)):
            if opt not in found:
                missing.append(f"{page} does not document {opt} (`ramforge {cmd} --help` "
                               f"prints it): add it to the page's options")
        print(f"ramforge {cmd}: every --help option is on {page}")
    for m in missing:
        print(f"FAIL {m}")
    check(not missing, f"{len(missing)} options undocumented: {'; '.join(missing)}")


CASES = {"commands": case_commands, "options": case_options}


if __name__ == "__main__":
    run_main(CASES, Ctx, "ramforge-doc-")
