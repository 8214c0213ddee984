#!/usr/bin/env python3
"""ramforge installed like a library, and examples/embed.c built against the install.

Usage: test_install.py --build-dir DIR --source-dir DIR --cmake BIN --cc BIN --cxx BIN
                       --ramforge BIN [--llama-prefix DIR] --schema FILE CASE

Each CASE installs the build (`cmake --install BUILD --prefix TMP/prefix`)
into a temporary folder under the build directory, removed afterwards:

  layout        what the install holds: libramforge.so with its SONAME and an
                rpath that finds llama.cpp, libramforge.a, every public header
                (self-contained in C and C++, none including jansson.h), ramforge.pc
                (relocatable, naming the llama.cpp build), the CMake package, the
                CLI, the man page and the bash completion (rendered, and sourced
                in bash)
  exports       the public line: at most MAX_HEADERS headers, none naming an
                internal symbol (forge_, rfsys_, FORGE_); `nm -D --defined-only`
                of the .so lists only functions an installed header declares, at
                most MAX_EXPORTS, and no C++ internal of llama.cpp is imported
  pkgconfig     embed.c compiled with `pkg-config --cflags --libs ramforge`
  find_package  examples/CMakeLists.txt (find_package(ramforge): embed and stream_embed),
                shared and static,
                -Wall -Wextra -Werror
  other_llama   embed run with another build of libllama preloaded (a copy of the
                prefix's with its GNU build ID changed): the same tokens, no crash,
                and the report's warnings and KvCache note carry one line naming
                both builds; llama.cpp's C++ internals are not called; the CLI's
                --version prints that line on stderr
  stream_embed  examples/stream_embed.c (pkg-config, -Werror) on a tinyllama-shaped
                Q8_0 model under a memory cgroup of 0.75x the file, model evicted
                first, policy streaming: tokens those of --no-ramforge without a
                limit, the report's streaming.read_ahead shows the decode computed
                from the window, the application's cb_eval saw every node (skip:
                no root or no v1 memory cgroup, an ASan build)

The embed binaries run on a generated model: their tokens must equal the same
program run with --no-ramforge and `ramforge run` (forge's own decode loop), and
their reports must pass tests/schema/validate_report.py. Exit 0 pass, 1 fail,
77 skip (no tokenizer vocab to generate a model with).
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "schema"))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import validate_report  # noqa: E402
from e2e_util import (SKIP, Failure, Skip, asan_build, check, evict,  # noqa: E402
                      memory_child_cgroup)

PROMPT = "Hello my name is"
N_PREDICT = 16
PUBLIC_PREFIX = r"(?:rf|rfsys|forge)_\w+"
# The calls the embedding example may make (docs/guide/embedding.md).
EMBED_MAX_CALLS = 8
# stream_embed.c: embed's 8, and what streaming adds (operation_begin, whose admission makes
# the plan, and rf_session_admission for a refusal's reason; the window's open, decorator,
# decode end and close) and rf_strerror for its warning: 15.
STREAM_EMBED_MAX_CALLS = EMBED_MAX_CALLS + 7
# The installed interface (issue 19): session.h, error.h and one types header.
MAX_HEADERS = 3
MAX_EXPORTS = 40
# forge's application code (src/forge: generate.c, sample.c, mkmodel.c, library rfforge_app),
# which the CLI links and libramforge does not.
APP_FUNCTIONS = {"forge_generate", "forge_sampler_chain", "forge_sample", "forge_mkmodel",
                 "forge_tokenize", "forge_chat_apply"}
INTERNAL_NAME = re.compile(r"\b(?:forge_\w+|rfsys_\w+|FORGE_\w+)")


def run(argv, env=None, cwd=None, check_rc=True, timeout=300, preexec_fn=None):
    p = subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=env, cwd=cwd,
                       timeout=timeout, preexec_fn=preexec_fn)
    check(0 <= p.returncode < 128, f"{argv[0]} crashed ({p.returncode}): {p.stderr[-2000:]}")
    if check_rc and p.returncode != 0:
        raise Failure(f"{' '.join(map(str, argv))} exited {p.returncode}\n"
                      f"stdout: {p.stdout[-2000:]}\nstderr: {p.stderr[-2000:]}")
    return p


def clean_env(**extra):
    """The environment without LD_LIBRARY_PATH: binaries must find their libraries by rpath."""
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    env.update(extra)
    return env


class Ctx:
    def __init__(self, args, tmp):
        self.a = args
        self.tmp = tmp
        self.prefix = os.path.join(tmp, "prefix")
        run([args.cmake, "--install", args.build_dir, "--prefix", self.prefix])
        self.libdir = os.path.join(self.prefix, "lib")
        self.so = os.path.join(self.libdir, "libramforge.so")
        self._model = None
        self._reference = None

    def pkg_config_env(self):
        """PKG_CONFIG_PATH: the install, llama.cpp's prefix (ramforge.pc requires llama), then
        the caller's PKG_CONFIG_PATH (llama.pc when llama.cpp was not given by prefix)."""
        path = [os.path.join(self.libdir, "pkgconfig")]
        if self.a.llama_prefix:
            path.append(os.path.join(self.a.llama_prefix, "lib", "pkgconfig"))
        if os.environ.get("PKG_CONFIG_PATH"):
            path.append(os.environ["PKG_CONFIG_PATH"])
        return clean_env(PKG_CONFIG_PATH=os.pathsep.join(path))

    def soname(self):
        """libramforge.so.MAJOR.MINOR from `ramforge --version` (0.x: each minor may break the ABI)."""
        m = re.match(r"ramforge (\d+)\.(\d+)\.\d+", run([self.a.ramforge, "--version"]).stdout)
        check(m, "ramforge --version prints no version")
        return f"libramforge.so.{m.group(1)}.{m.group(2)}"

    def model(self):
        if not self._model:
            self._model = os.path.join(self.tmp, "small-q8_0.gguf")
            p = run([self.a.ramforge, "mkmodel", "--preset", "small", "--type", "q8_0", "--seed",
                     "42", "--quiet", "-o", self._model], check_rc=False)
            if p.returncode != 0 and "ggml-vocab" in p.stderr:
                raise Skip("no tokenizer vocab to generate a model (llama.cpp was not built by "
                           f"scripts/build-llama.sh): {p.stderr.strip()}")
            check(p.returncode == 0, f"mkmodel failed: {p.stderr}")
        return self._model

    def reference(self):
        """`ramforge run`'s report for the same prompt: tokens from forge's own decode loop."""
        if not self._reference:
            path = os.path.join(self.tmp, "run-report.json")
            run([self.a.ramforge, "run", "-m", self.model(), "-p", PROMPT, "-n", N_PREDICT,
                 "--residency-report-json", path])
            with open(path) as f:
                self._reference = json.load(f)
        return self._reference

    def embed(self, binary, *flags, report=None):
        """Runs embed; returns (token ids printed on stdout, report or None)."""
        argv = [binary, *flags, self.model(), PROMPT, N_PREDICT] + ([report] if report else [])
        p = run(argv, env=clean_env())
        lines = p.stdout.splitlines()
        check(len(lines) == 1, f"{binary}: expected one line of token ids, got {p.stdout!r}")
        ids = [int(t) for t in lines[0].split()]
        if not report or not os.path.exists(report):
            return ids, None
        errors = validate_report.validate(self.a.schema, report)
        check(not errors, f"{report} does not match the schema: {errors[:3]}")
        with open(report) as f:
            return ids, json.load(f)


def exported_symbols(so):
    out = run(["nm", "-D", "--defined-only", so]).stdout
    return {parts[2] for parts in (line.split() for line in out.splitlines())
            if len(parts) == 3 and parts[1] in "TDBR"}


def archive_globals(a):
    out = run(["nm", "-g", "--defined-only", a]).stdout
    return {parts[2] for parts in (line.split() for line in out.splitlines())
            if len(parts) == 3 and parts[1] in "TDBR"}


def declared_functions(headers):
    """The non-inline functions the headers declare."""
    declared = set()
    proto = re.compile(r"^(?!static|typedef|#)[A-Za-z_][\w \t\*]*?\b(" + PUBLIC_PREFIX + r")\s*\(",
                       re.M)
    for h in headers:
        with open(h) as f:
            declared |= set(proto.findall(f.read()))
    return declared


def ramforge_imports(binary, exported):
    """The libramforge functions a binary imports (dynamic undefined symbols)."""
    out = run(["nm", "-D", "--undefined-only", binary]).stdout
    return {line.split()[-1] for line in out.splitlines() if line.split()} & exported


def check_needed(binary, soname, wanted):
    out = run(["readelf", "-d", binary]).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)
    check((soname in needed) == wanted,
          f"{binary}: NEEDED {needed} {'lacks' if wanted else 'has'} {soname}")


def check_tokens(c, ids, label):
    ref = c.reference()["output"]["token_ids"]
    check(ids, f"{label}: no token generated")
    check(ids == ref, f"{label}: tokens {ids} differ from ramforge run's {ref}")


def check_embed_report(c, ids, doc, label):
    """The report of one embed run: its tokens, samples and the leases' executions."""
    ref = c.reference()
    out = doc["output"]
    check(out["token_ids"] == ids, f"{label}: report tokens {out['token_ids']} != stdout {ids}")
    check(out["prompt_token_ids"] == ref["output"]["prompt_token_ids"],
          f"{label}: prompt tokens {out['prompt_token_ids']}")
    check(doc["operation"]["index"] == 1 and doc["operation"]["operations"] == 1,
          f"{label}: operation {doc['operation']}")
    check(doc["model"]["path"] == c.model(), f"{label}: model path {doc['model']['path']}")
    labels = [s["label"] for s in doc["residency"]["samples"]]
    check(labels[:3] == ["after_load", "end_of_session", "after_session"],
          f"{label}: sample labels {labels}")
    # Every decode embed made went through a lease: the execution generation
    # counts them (plus the access probe's one decode when the probe ran, as a
    # releasing policy makes it), as forge's own loop does for run.
    def decodes(d):
        return d["native"]["execution_generation"] - (d["model"]["access_basis"] == "graph_probe")
    nat = doc["native"]
    check(decodes(doc) == decodes(ref),
          f"{label}: {decodes(doc)} decodes counted (execution generation "
          f"{nat['execution_generation']}), ramforge run's {decodes(ref)}")
    check(nat["quiescent"] is True and nat["in_flight_contexts"] == 0,
          f"{label}: native {nat}")
    return labels


def check_man_and_completion(c):
    """ramforge(1) under share/man/man1 renders with man -l; the completion, under
    share/bash-completion/completions as bash-completion's loader names it (the
    command's name), completes an enum value when sourced in bash."""
    page = os.path.join(c.prefix, "share", "man", "man1", "ramforge.1")
    check(os.path.exists(page), f"{page} not installed")
    text = run(["man", "-l", page], env=clean_env(MANWIDTH="80")).stdout
    check("ramforge serve" in text and "EXIT STATUS" in text, f"man -l {page}: {text[:300]!r}")
    comp = os.path.join(c.prefix, "share", "bash-completion", "completions", "ramforge")
    check(os.path.exists(comp), f"{comp} not installed")
    script = ('source "$1"; COMP_WORDS=(ramforge run --release-mode p); COMP_CWORD=3; '
              '_ramforge; echo "${COMPREPLY[*]}"')
    out = run(["bash", "--norc", "--noprofile", "-c", script, "bash", comp]).stdout.strip()
    check(out == "pageout", f"installed completion of 'run --release-mode p': {out!r}")


def case_layout(c):
    soname = c.soname()
    check(os.path.islink(c.so) and os.path.basename(os.path.realpath(c.so)).startswith(soname),
          f"{c.so} is not a link to {soname}.*")
    check(os.path.exists(os.path.join(c.libdir, soname)), f"{soname} not installed")
    dyn = run(["readelf", "-d", c.so]).stdout
    check(f"Library soname: [{soname}]" in dyn, f"SONAME is not {soname}: {dyn}")
    ldd = run(["ldd", c.so], env=clean_env()).stdout
    check("not found" not in ldd and "libllama" in ldd, f"libramforge.so's dependencies: {ldd}")
    archive = os.path.join(c.libdir, "libramforge.a")
    check(os.path.exists(archive), "libramforge.a not installed")

    src_headers = sorted(os.path.basename(h) for h in
                         glob.glob(os.path.join(c.a.source_dir, "include", "ramforge", "*.h")))
    headers = sorted(glob.glob(os.path.join(c.prefix, "include", "ramforge", "*.h")))
    check([os.path.basename(h) for h in headers] == src_headers,
          f"installed headers {headers} != include/ramforge {src_headers}")
    for h in headers:
        with open(h) as f:
            text = f.read()
        check(not re.search(r'#\s*include\s*[<"]jansson|\bjson_\w+', text),
              f"{h} includes jansson.h or names a jansson type or function")
        name = "ramforge/" + os.path.basename(h)
        for compiler, std in ((c.a.cc, "-std=c11"), (c.a.cxx, "-std=c++17")):
            lang = "c" if std == "-std=c11" else "c++"
            run([compiler, std, "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                 "-I", os.path.join(c.prefix, "include"), "-x", lang, "-include", name,
                 "/dev/null"])

    libdir = run(["pkg-config", "--variable=libdir", "ramforge"],
                 env=c.pkg_config_env()).stdout.strip()
    check(os.path.realpath(libdir) == os.path.realpath(c.libdir),
          f"ramforge.pc's libdir {libdir} is not the install prefix's {c.libdir}")
    # The llama.cpp build: ramforge.pc's variables, the CLI's --version line.
    llama = {v: run(["pkg-config", f"--variable={v}", "ramforge"],
                    env=c.pkg_config_env()).stdout.strip()
             for v in ("llama_cpp", "llama_soname", "llama_build_id")}
    if c.a.llama_prefix:
        with open(os.path.join(c.a.llama_prefix, "share", "ramforge", "llama.cpp.version")) as f:
            recorded = f.readline().strip()
        check(llama["llama_cpp"] == recorded,
              f"ramforge.pc llama_cpp={llama['llama_cpp']!r}, the prefix records {recorded!r}")
        dyn = run(["readelf", "-d", "-n", os.path.join(c.a.llama_prefix, "lib", "libllama.so")]).stdout
        check(f"Library soname: [{llama['llama_soname']}]" in dyn and
              f"Build ID: {llama['llama_build_id']}" in dyn,
              f"ramforge.pc {llama} does not match the prefix's libllama")
    for f in ("ramforgeConfig.cmake", "ramforgeConfigVersion.cmake", "ramforgeTargets.cmake"):
        check(os.path.exists(os.path.join(c.libdir, "cmake", "ramforge", f)), f"{f} not installed")
    p = run([os.path.join(c.prefix, "bin", "ramforge"), "--version"], env=clean_env())
    want = f"(llama.cpp {llama['llama_cpp']}, {llama['llama_soname']})"
    check(p.stdout.startswith("ramforge ") and want in p.stdout,
          f"installed CLI --version {p.stdout!r} does not name {want}")
    check_man_and_completion(c)
    print(f"{soname}: {len(headers)} headers; llama.cpp {llama['llama_cpp']}, "
          f"{llama['llama_soname']}, build ID {llama['llama_build_id']}")


def case_exports(c):
    """The public line: few installed headers, only their functions exported."""
    headers = sorted(glob.glob(os.path.join(c.prefix, "include", "ramforge", "*.h")))
    check(0 < len(headers) <= MAX_HEADERS,
          f"{len(headers)} headers installed (at most {MAX_HEADERS}): {headers}")
    for h in headers:
        with open(h) as f:
            found = sorted(set(INTERNAL_NAME.findall(f.read())))
        check(not found, f"{h} names internal symbols: {found}")
    declared = declared_functions(headers)
    exported = exported_symbols(c.so)
    check(declared and declared <= exported,
          f"declared in the headers but not exported: {sorted(declared - exported)}")
    check(exported <= declared,
          f"exported but declared in no installed header: {sorted(exported - declared)}")
    check(len(exported) <= MAX_EXPORTS, f"{len(exported)} functions exported (at most "
          f"{MAX_EXPORTS}): {sorted(exported)}")
    private = archive_globals(os.path.join(c.libdir, "libramforge.a")) - declared
    check(private, "libramforge.a holds no internal function (the check would be empty)")
    check(not private & exported, f"private helpers exported: {sorted(private & exported)}")
    # forge's application code (generation, sampling, mkmodel) is the CLI's, not the library's.
    app = sorted(s for s in private if s in APP_FUNCTIONS)
    check(not app, f"libramforge carries the CLI's application code: {app}")
    # llama.cpp's C++ internals are looked up at first use, never imported.
    out = run(["nm", "-D", "--undefined-only", c.so]).stdout
    mangled = [s for s in (line.split()[-1] for line in out.splitlines() if line.split())
               if s.startswith("_Z") and "llama" in s]
    check(not mangled, f"libramforge.so imports llama.cpp's C++ internals: {mangled}")
    print(f"{len(headers)} headers, {len(exported)} functions exported (all declared), "
          f"{len(private)} internal functions hidden: {', '.join(sorted(exported))}")


def build_embed_pc(c, name, source="embed.c"):
    """examples/SOURCE compiled with `pkg-config --cflags --libs ramforge`, -Werror."""
    env = c.pkg_config_env()
    flags = run(["pkg-config", "--cflags", "--libs", "ramforge"], env=env).stdout.split()
    libdirs = [run(["pkg-config", "--variable=libdir", pkg], env=env).stdout.strip()
               for pkg in ("ramforge", "llama")]
    binary = os.path.join(c.tmp, name)
    run([c.a.cc, "-std=c11", "-Wall", "-Wextra", "-Werror",
         os.path.join(c.a.source_dir, "examples", source), *flags,
         "-Wl,-rpath," + ":".join(libdirs), "-o", binary], env=env)
    return binary


def case_pkgconfig(c):
    binary = build_embed_pc(c, "embed-pc")
    check_needed(binary, c.soname(), True)
    calls = ramforge_imports(binary, exported_symbols(c.so))
    check("rf_session_wrap" in calls and len(calls) <= EMBED_MAX_CALLS,
          f"embed calls {len(calls)} ramforge functions: {sorted(calls)}")

    report = os.path.join(c.tmp, "embed-pc.json")
    ids, doc = c.embed(binary, report=report)
    check(doc is not None, f"{report} not written")
    check_tokens(c, ids, "embed (pkg-config)")
    check_embed_report(c, ids, doc, "embed (pkg-config)")
    check(doc["policy"]["profile"] == "observe" and doc["application"]["requested_bytes"] in (0, None),
          f"observe released something: {doc['application']}")

    unused = os.path.join(c.tmp, "no-ramforge.json")
    plain, _ = c.embed(binary, "--no-ramforge", report=unused)
    check(plain == ids, f"--no-ramforge tokens {plain} != {ids}")
    check(not os.path.exists(unused), "--no-ramforge wrote a report")
    print(f"pkg-config: {len(ids)} tokens identical with and without ramforge and to ramforge "
          f"run; {len(calls)} ramforge functions called: {', '.join(sorted(calls))}")


def case_find_package(c):
    soname = c.soname()
    built = {}
    for kind, static in (("shared", "OFF"), ("static", "ON")):
        bdir = os.path.join(c.tmp, f"build-{kind}")
        run([c.a.cmake, "-S", os.path.join(c.a.source_dir, "examples"), "-B", bdir,
             f"-DCMAKE_PREFIX_PATH={c.prefix}", f"-DCMAKE_C_COMPILER={c.a.cc}",
             "-DCMAKE_C_FLAGS=-Wall -Wextra -Werror", f"-DEMBED_STATIC={static}"],
            env=clean_env())
        run([c.a.cmake, "--build", bdir], env=clean_env())
        built[kind] = os.path.join(bdir, "embed")
        check_needed(built[kind], soname, kind == "shared")

    plain, _ = c.embed(built["shared"], "--no-ramforge")
    check_tokens(c, plain, "embed --no-ramforge")

    # Static, policy observe.
    ids, doc = c.embed(built["static"], report=os.path.join(c.tmp, "embed-static.json"))
    check(ids == plain, f"static: tokens {ids} != {plain} without ramforge")
    check_embed_report(c, ids, doc, "embed (static)")

    # Shared, memory-bound: the after_session boundary releases weight pages.
    target = 8 << 20
    ids, doc = c.embed(built["shared"], "--memory-target", target,
                       report=os.path.join(c.tmp, "embed-shared.json"))
    check(ids == plain, f"memory-bound: tokens {ids} != {plain} without ramforge")
    labels = check_embed_report(c, ids, doc, "embed (memory-bound)")
    check(doc["policy"]["profile"] == "memory-bound" and doc["policy"]["target_bytes"] == target,
          f"policy {doc['policy']}")
    b = [x for x in doc["application"]["boundaries"] if x["boundary"] == "after_session"]
    check(b and b[0]["attempted"] and b[0]["accepted_bytes"] > 0 and
          b[0]["observed_mapping_delta_bytes"] < 0,
          f"no measured release after the session: {doc['application']['boundaries']}")
    check("after_release" in labels, f"no after_release sample: {labels}")
    print(f"find_package: shared and static, {len(ids)} tokens identical; memory-bound released "
          f"{b[0]['accepted_bytes']} B after the session (mapping delta "
          f"{b[0]['observed_mapping_delta_bytes']} B)")


def other_libllama(c):
    """A copy of the prefix's libllama with another GNU build ID (one byte flipped)."""
    if not c.a.llama_prefix:
        raise Skip("llama.cpp was not given by prefix: no libllama to copy")
    so = os.path.realpath(os.path.join(c.a.llama_prefix, "lib", "libllama.so"))
    note = run(["readelf", "-n", so]).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", note)
    check(m, f"{so} has no GNU build ID: {note[:300]}")
    with open(so, "rb") as f:
        data = f.read()
    bid = bytes.fromhex(m.group(1))
    check(data.count(bid) == 1, f"the build ID of {so} is not in the file once")
    other = bid[:-1] + bytes([bid[-1] ^ 0xFF])
    path = os.path.join(c.tmp, "other", "libllama.so.0")
    os.makedirs(os.path.dirname(path))
    with open(path, "wb") as f:
        f.write(data.replace(bid, other))
    # Its RUNPATH is $ORIGIN: ggml beside it, the prefix's own.
    for dep in glob.glob(os.path.join(c.a.llama_prefix, "lib", "libggml*.so.*")):
        os.symlink(dep, os.path.join(os.path.dirname(path), os.path.basename(dep)))
    return path, m.group(1), other.hex()


def case_other_llama(c):
    ldd = run(["ldd", c.so], env=clean_env()).stdout
    if "libasan" in ldd or "libtsan" in ldd:
        raise Skip("a sanitizer build: its runtime must come first, before a preloaded libllama")
    lib, built_id, other_id = other_libllama(c)
    binary = build_embed_pc(c, "embed-other")
    plain, _ = c.embed(binary, "--no-ramforge")
    report = os.path.join(c.tmp, "embed-other.json")
    argv = [binary, c.model(), PROMPT, N_PREDICT, report]
    p = run(argv, env=clean_env(LD_PRELOAD=lib))
    ids = [int(t) for t in p.stdout.split()]
    check(ids == plain, f"another libllama: tokens {ids} != {plain} without ramforge")
    with open(report) as f:
        doc = json.load(f)
    line = [w for w in doc["warnings"] if "libllama" in w]
    check(len(line) == 1 and lib in line[0] and other_id in line[0] and built_id in line[0],
          f"no one warning naming both builds ({other_id}, {built_id}): {doc['warnings']}")
    kv = [e for e in doc["ledger"]["entries"] if e["category"] == "KvCache"]
    # The ledger's note may be shorter than the line: the path, last, goes first.
    check(kv and line[0].startswith(kv[0]["note"]) and other_id in kv[0]["note"] and
          built_id in kv[0]["note"], f"KvCache does not say why: {kv}")
    check(doc["model"]["access_basis"] == "graph_probe",
          f"placement (llama.cpp's tensor map) was used: {doc['model']['access_basis']}")
    # The CLI's --version: the build it was compiled against, and the line on stderr.
    cli = os.path.join(c.prefix, "bin", "ramforge")
    p = run([cli, "--version"], env=clean_env())
    check(p.stderr == "", f"--version with the recorded libllama warns: {p.stderr!r}")
    p = run([cli, "--version"], env=clean_env(LD_PRELOAD=lib))
    warn = p.stderr.splitlines()
    check(len(warn) == 1 and other_id in warn[0] and built_id in warn[0],
          f"--version with another libllama: stderr {p.stderr!r}")
    print(f"another libllama (build ID {other_id}): {len(ids)} tokens as without ramforge; "
          f"report: {line[0]}")


def stream_embed_run(binary, model, *flags, report=None, preexec_fn=None):
    """(token ids, "on"/"off" for the window, cb_eval's count) of one stream_embed run."""
    argv = [binary, *flags, "--threads", "2", model, PROMPT, "4"] + ([report] if report else [])
    p = run(argv, env=clean_env(), preexec_fn=preexec_fn)
    m = re.search(r"stream_embed: window (on|off), cb_eval asked (\d+) times", p.stderr)
    check(m, f"stream_embed printed no window line: {p.stderr[-1000:]!r}")
    return [int(t) for t in p.stdout.split()], m.group(1), int(m.group(2))


def case_stream_embed(c):
    """Streaming through installed calls only: the read-ahead window in an embedder's own
    llama_context, under a real limit the model does not fit."""
    if asan_build(c.a.ramforge):
        raise Skip("an ASan build: its shadow memory grows the anonymous memory past a limit "
                   "sized from the file")
    binary = build_embed_pc(c, "stream-embed", "stream_embed.c")
    calls = ramforge_imports(binary, exported_symbols(c.so))
    check("rf_read_ahead_context_params" in calls and len(calls) <= STREAM_EMBED_MAX_CALLS,
          f"stream_embed calls {len(calls)} ramforge functions: {sorted(calls)}")
    model = os.path.join(c.tmp, "tinyllama-q8_0.gguf")
    run([c.a.ramforge, "mkmodel", "--preset", "tinyllama", "--type", "q8_0", "--seed", "42",
         "--quiet", "-o", model])
    plain, window, asked = stream_embed_run(binary, model, "--no-ramforge")
    check(plain and window == "off", f"--no-ramforge: tokens {plain}, window {window}")
    report = os.path.join(c.tmp, "stream-embed.json")
    with memory_child_cgroup("ramforge-install-stream", os.path.getsize(model) * 3 // 4) as enter:
        evict(model)  # its pages charged elsewhere would not count against the limit
        ids, window, seen = stream_embed_run(binary, model, report=report, preexec_fn=enter)
    check(ids == plain, f"streaming under the limit: tokens {ids} != {plain} without ramforge")
    check(window == "on", "no read-ahead window under a limit of 0.75x the file")
    check(seen == asked, f"the application's cb_eval was asked {seen} times through the "
          f"window, {asked} without it: the chain lost nodes")
    errors = validate_report.validate(c.a.schema, report)
    check(not errors, f"{report} does not match the schema: {errors[:3]}")
    with open(report) as f:
        st = json.load(f)["streaming"]
    ra = st["read_ahead"]
    check(st["pin"]["pinned"] and st["pin"]["unpinned_at"] == "after_session",
          f"the plan's pins: {st['pin']}")
    check(ra is not None and ra["units"] > 0 and ra["units_used"] > 0 and
          ra["units_fallback"] == 0 and ra["first_error"] == 0 and ra["read_bytes"] > 0,
          f"the decode did not compute from the window: {ra}")
    print(f"stream_embed under 0.75x the file ({len(calls)} ramforge functions): {len(ids)} "
          f"tokens as without ramforge; window: {ra['units_used']} units used of "
          f"{ra['units_read']} read, {ra['read_bytes']} B read, {ra['waits']} waits "
          f"({ra['wait_ns'] / 1e6:.0f} ms); pinned {st['pin']['accepted_bytes']} B")


CASES = {"layout": case_layout, "exports": case_exports, "pkgconfig": case_pkgconfig,
         "find_package": case_find_package, "other_llama": case_other_llama,
         "stream_embed": case_stream_embed}


def main():
    ap = argparse.ArgumentParser()
    for opt in ("--build-dir", "--source-dir", "--cmake", "--cc", "--cxx", "--ramforge",
                "--schema"):
        ap.add_argument(opt, required=True)
    ap.add_argument("--llama-prefix", default="")
    ap.add_argument("case", choices=sorted(CASES))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="test-install-", dir=args.build_dir) as tmp:
        try:
            CASES[args.case](Ctx(args, tmp))
        except Skip as e:
            print(f"SKIP {args.case}: {e}")
            return SKIP
        except Failure as e:
            print(f"FAIL {args.case}: {e}")
            return 1
    print(f"PASS {args.case}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
