#!/usr/bin/env python3
"""The deployment examples of docs/deploy/ (issue 24 item 9, issue 21 item 11), exercised as
far as this machine allows; docs/guide/deploy.md, "systemd, Docker, Kubernetes", says what is and is not tested.

  units       each systemd unit passes `systemd-analyze verify` (its binaries pointed at
              this build and at the pinned llama.cpp's llama-server; skipped with the
              reason when that is absent) with nothing on stderr, MANPATH unset (its
              Documentation= the man page make install puts in /usr/local); MemoryMax= is set, and
              the fit check of ExecStartPre runs here against a small model under a
              --memory-limit equal to MemoryMax (exit 0), and refuses under 8 MiB (exit 1);
              the exec unit's ExecStart runs here (exec_here, below)
  pod         pod.yaml parses (python3-yaml); every pod has a memory limit equal to its
              init container's --memory-limit, and the Prometheus scrape annotations on
              ramforge's own /metrics port (serve's --port, exec's --metrics-listen), a
              port of the container; the init container's command runs here (exit 0;
              under 8 MiB exit 1), the serve container's command serves /health and
              /metrics here (on 127.0.0.1, port 0), stopped by SIGTERM (exit 0), and the
              exec container's command runs here (exec_here)
  dockerfile  no container runtime runs here, so the image is not built: its bases are
              Debian 12, every COPY source exists in the repository, every make target it
              runs exists, every Debian package it installs is known to apt, the runtime
              packages hold every library this build's ramforge and the pin's llama-server
              load (ldd), and the llama-server link's target pattern names the pin's
  model_path  the model file on the host is one path in the units (MODEL=), the
              Dockerfile's `docker run -v HOST:/models` and the pods' hostPath volumes
  exec_here   (units, pod) `ramforge exec ... -- llama-server ...` with the pin's
              llama-server for the image's path, 127.0.0.1 for 0.0.0.0 and free ports:
              llama-server answers /health and its /metrics, exec's --metrics-listen
              serves ramforge's figures of it (the ledger, the live mapping Rss), SIGTERM
              ends both (exit 0), and no spool is left

Usage: test_deploy.py --ramforge BIN CASE.  Exit 0 pass, 1 fail, 77 skip.
"""
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from e2e_util import (ModelCtx, Skip, asan_build, check, ended_by_sigterm,  # noqa: E402
                      memory_cgroup_v1, memory_child_cgroup, run_main)

SOURCE = os.path.normpath(os.path.join(HERE, "..", ".."))
DEPLOY = os.path.join(SOURCE, "docs", "deploy")
INSTALLED = "/usr/local/bin/ramforge"
INSTALLED_MAN = "/usr/local/share/man/man1/ramforge.1"  # make install's (CMAKE_INSTALL_MANDIR)
HOST_MODEL = "/var/lib/ramforge/model.gguf"  # the model on the host, in every file
IMAGE_LLAMA_SERVER = "/usr/local/bin/llama-server"  # the Dockerfile's link, the unit's path


def llama_server():
    """The pinned llama.cpp's llama-server (scripts/build-llama.sh's cache), or None."""
    cache = os.environ.get("RAMFORGE_CACHE", "/var/cache/ramforge")
    found = sorted(glob.glob(os.path.join(cache, "llama-v0.5.0-*", "bin", "llama-server")))
    return found[0] if found else None


def systemd_size(text):
    """A systemd size (K, M, G, T: powers of 1024, as systemd reads them) in bytes."""
    m = re.fullmatch(r"(\d+)([KMGT]?)", text.strip())
    check(m is not None, f"MemoryMax={text} is not a plain size")
    return int(m.group(1)) * 1024 ** " KMGT".index(m.group(2) or " ")


def unit_value(text, key):
    """A unit's KEY= value with its continuation lines joined, or None."""
    joined = re.sub(r"\\\n\s*", " ", text)
    m = re.search(rf"^{key}=(.*)$", joined, re.M)
    return m.group(1).strip() if m else None


def free_port():
    sys.path.insert(0, os.path.join(SOURCE, "bench"))
    from serve_idle import free_port as free
    return free()


def http_text(url):
    """The body of GET url, or None while nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.read().decode()
    except OSError:
        return None


def option_port(argv, opt):
    """The port of argv's opt value (PORT or ADDR:PORT)."""
    return int(argv[argv.index(opt) + 1].rsplit(":", 1)[-1])


def cache_ram_line(text):
    """The MiB of exec's "llama-server's --cache-ram set to N MiB" line in text, or None."""
    m = re.search(r"^ramforge: exec: llama-server's --cache-ram set to (\d+) MiB", text, re.M)
    return int(m.group(1)) if m else None


def exec_here(c, argv, model, limit):
    """Runs a `ramforge exec ... -- llama-server ...` command here (see the module's text), in
    a child memory cgroup of the unit's or the pod's limit where there is one: the file passes
    no --cache-ram, so exec sizes llama-server's prompt cache to the room (its one line; the
    environment llama-server got says the same figure)."""
    for opt in ("--cache-ram", "-cram", "--keep-cache-ram"):
        check(opt not in argv, f"{opt} in {argv}: exec's cache sizing is not used")
    try:
        memory_cgroup_v1()
    except Skip as e:
        print(f"SKIP part: the command runs without its limit ({e})")
        return exec_started(c, argv, model, None)
    with memory_child_cgroup("ramforge-deploy", limit) as enter:
        text = exec_started(c, argv, model, enter)
    if text is None:  # not run (an ASan build: said)
        return None
    check(cache_ram_line(text) is not None and 0 < cache_ram_line(text) < 8192,
          f"exec did not size --cache-ram under {limit} bytes: {text[-800:]!r}")


def exec_started(c, argv, model, enter):
    """exec_here's run (enter: a preexec_fn into the limit's cgroup, or None); its stderr."""
    server = llama_server()
    if not server:
        print("SKIP part: no llama-server in the pinned llama.cpp's prefix: "
              f"{' '.join(argv[:3])} ... is not run")
        return None
    if asan_build(c.rf):
        print("SKIP part: an AddressSanitizer build cannot be preloaded into "
              f"llama-server (make asan): {' '.join(argv[:3])} ... is not run")
        return None
    argv = [a.replace("/models/model.gguf", model) for a in argv]
    check(IMAGE_LLAMA_SERVER in argv, f"llama-server is not {IMAGE_LLAMA_SERVER}: {argv}")
    argv[argv.index(IMAGE_LLAMA_SERVER)] = server
    lport, mport = free_port(), free_port()
    argv[argv.index("--host") + 1] = "127.0.0.1"
    argv[argv.index("--port") + 1] = str(lport)
    argv[argv.index("--metrics-listen") + 1] = f"127.0.0.1:{mport}"
    err = open(c.path("exec-here.err"), "w+")
    env = {k: v for k, v in os.environ.items() if k != "LLAMA_ARG_CACHE_RAM"}
    proc = subprocess.Popen([c.rf, *argv[1:]], stdout=subprocess.DEVNULL, stderr=err,
                            env=dict(env, TMPDIR=c.tmp), preexec_fn=enter)
    with ended_by_sigterm(proc, "exec"):
        deadline = time.monotonic() + 120
        while http_text(f"http://127.0.0.1:{lport}/health") is None:
            check(proc.poll() is None and time.monotonic() < deadline,
                  f"llama-server under exec did not start (exit {proc.poll()})")
            time.sleep(0.1)  # polled with a deadline
        own = http_text(f"http://127.0.0.1:{lport}/metrics")
        check(own and "llamacpp:" in own, "llama-server's own /metrics")
        body = http_text(f"http://127.0.0.1:{mport}/metrics") or ""
        for name in ("ramforge_ledger_bytes{", "ramforge_live_mapping_rss_bytes{",
                     "ramforge_exec_contexts_alive{"):
            check(name in body, f"exec --metrics-listen lacks {name}: {body[:300]!r}")
        if enter:
            with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
                kid = f.read().split()[0]
            with open(f"/proc/{kid}/environ", "rb") as f:
                given = [v for v in f.read().split(b"\0") if v.startswith(b"LLAMA_ARG_CACHE_RAM=")]
    err.seek(0)
    text = err.read()
    err.close()
    left = [n for n in os.listdir(c.tmp) if n.startswith("rf-exec-metrics-")]
    said = [ln for ln in text.splitlines() if ln.startswith("ramforge:")]
    # under the limit: one line, exec's --cache-ram, and llama-server got that figure
    check(not left and len(said) == (1 if enter else 0) and
          (not enter or given == [b"LLAMA_ARG_CACHE_RAM=%d" % (cache_ram_line(said[0]) or -1)]),
          f"spool {left}, stderr {text[-800:]!r}")
    print(f"ran here: {' '.join(argv[1:4])} ... -- llama-server (both /metrics read)"
          + (f", --cache-ram {cache_ram_line(text)} MiB" if enter else ""))
    return text


def case_units(c):
    if not shutil.which("systemd-analyze"):
        raise Skip("systemd-analyze is not installed")
    model = c.model()
    server = llama_server()
    for name in ("ramforge-serve.service", "ramforge-exec.service"):
        with open(os.path.join(DEPLOY, name)) as f:
            text = f.read()
        if "llama-server" in text and not server:
            print(f"SKIP part: {name}: no llama-server in the pinned llama.cpp's prefix")
            continue
        local = text.replace(INSTALLED, os.path.abspath(c.rf))
        if server:
            local = local.replace("/usr/local/bin/llama-server", server)
        path = c.path(name)
        with open(path, "w") as f:
            f.write(local)
        # as a user runs it: man: links checked (MANPATH unset, the page maybe not installed)
        env = {k: v for k, v in os.environ.items() if k != "MANPATH"}
        p = subprocess.run(["systemd-analyze", "verify", path], capture_output=True, text=True,
                           timeout=120, env=env)
        check(p.returncode == 0 and not p.stderr.strip(),
              f"systemd-analyze verify {name}: exit {p.returncode}: {p.stderr}")
        check(unit_value(text, "Documentation") == f"file:{INSTALLED_MAN}",
              f"{name}: Documentation= is not the installed man page {INSTALLED_MAN}")
        limit = systemd_size(unit_value(text, "MemoryMax") or "")
        pre = shlex.split(unit_value(local, "ExecStartPre").replace("${MODEL}", model))
        check(pre[1:3] == ["inspect", "-c"], f"{name}: ExecStartPre is not the fit check")
        # docs/guide/deploy.md: the unit's fit check reads MemoryMax= from the service's cgroup itself
        check("--memory-limit" not in pre, f"{name}: ExecStartPre passes a second limit")
        c.run(*pre[1:], "--memory-limit", str(limit))
        c.run(*pre[1:], "--memory-limit", "8Mi", check_rc=1)
        start = shlex.split(unit_value(text, "ExecStart").replace("${MODEL}", model))
        if start[1] == "exec":
            exec_here(c, start, model, limit)


def pods():
    import yaml  # python3-yaml
    with open(os.path.join(DEPLOY, "pod.yaml")) as f:
        return list(yaml.safe_load_all(f))


def k8s_bytes(q):
    """A Kubernetes memory quantity (Ki, Mi, Gi binary; K, M, G decimal) in bytes."""
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi|Ti|K|M|G|T)?", q)
    check(m is not None, f"memory quantity {q!r}")
    unit = m.group(2) or ""
    mult = 1024 ** (" KMGT".index(unit[0])) if unit.endswith("i") else \
        1000 ** (" KMGT".index(unit or " "))
    return int(m.group(1)) * mult


def serve_here(c, argv):
    """Runs a serve command here on 127.0.0.1:0; checks /health and /metrics; SIGTERM."""
    argv = list(argv)
    argv[argv.index("--host") + 1] = "127.0.0.1"
    argv[argv.index("--port") + 1] = "0"
    proc = subprocess.Popen([c.rf, *argv[1:]], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        with ended_by_sigterm(proc, "serve"):
            line = proc.stderr.readline()
            check("serving" in line, f"serve did not start: {line!r}")
            port = int(line.rsplit(":", 1)[1].strip().strip("/"))
            for path in ("/health", "/metrics"):
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=60) as r:
                    check(r.status == 200, f"{path}: {r.status}")
    finally:
        proc.stderr.close()
        proc.stdout.close()


def case_pod(c):
    try:
        docs = pods()
    except ImportError:
        raise Skip("python3-yaml is not installed")
    model = c.model()
    check(len(docs) == 2 and all(d["kind"] == "Pod" for d in docs), "two pods")
    for pod in docs:
        spec, ann = pod["spec"], pod["metadata"]["annotations"]
        main = spec["containers"][0]
        cmd = main["command"]
        port = option_port(cmd, "--port" if cmd[1] == "serve" else "--metrics-listen")
        check(ann.get("prometheus.io/scrape") == "true" and
              ann.get("prometheus.io/port") == str(port) and
              ann.get("prometheus.io/path") == "/metrics", f"scrape annotations {ann}")
        check(port in [p["containerPort"] for p in main["ports"]],
              f"ramforge's /metrics port {port} is not a port of the container")
        limit = k8s_bytes(main["resources"]["limits"]["memory"])
        init = spec["initContainers"][0]["command"]
        check(init[:3] == ["ramforge", "inspect", "-c"] and "--memory-limit" in init,
              f"the init container is not the fit check: {init}")
        given = init[init.index("--memory-limit") + 1]
        local = [a.replace("/models/model.gguf", model) for a in init]
        p = c.run(*local[1:], "--json")
        check(json.loads(p.stdout)["memory_limit_bytes"] == limit,
              f"{pod['metadata']['name']}: --memory-limit {given} is not limits.memory {limit}")
        c.run(*local[1:])
        small = list(local)
        small[small.index("--memory-limit") + 1] = "8Mi"
        c.run(*small[1:], check_rc=1)
        cmd = [a.replace("/models/model.gguf", model) for a in main["command"]]
        if cmd[1] == "serve":
            serve_here(c, cmd)
        else:
            check(cmd[1] == "exec" and cmd[cmd.index("--") + 1] == IMAGE_LLAMA_SERVER, f"{cmd}")
            exec_here(c, cmd, model, limit)


def case_dockerfile(c):
    with open(os.path.join(DEPLOY, "Dockerfile")) as f:
        text = f.read()
    joined = re.sub(r"\\\n\s*", " ", text)
    lines = [ln.strip() for ln in joined.splitlines() if ln.strip() and
             not ln.lstrip().startswith("#")]
    froms = [ln.split()[1] for ln in lines if ln.startswith("FROM ")]
    check(froms and all(re.fullmatch(r"debian:12(-slim)?", f) for f in froms),
          f"bases {froms}")
    for ln in lines:
        if ln.startswith("COPY ") and "--from=" not in ln:
            for src in ln.split()[1:-1]:
                check(os.path.exists(os.path.join(SOURCE, src)), f"COPY source {src} missing")
    runs = " && ".join(ln[4:] for ln in lines if ln.startswith("RUN "))
    targets = set(re.findall(r"\bmake ([a-z]+)", runs))
    check({"deps", "package"} <= targets, f"make targets {targets}")
    p = subprocess.run(["make", "-C", SOURCE, "-pqn"], capture_output=True, text=True)
    for t in targets:
        check(re.search(rf"^{t}:", p.stdout, re.M), f"the Makefile has no target {t}")
    pkgs = set()
    for m in re.finditer(r"apt-get install ([^&;]*)", runs):
        pkgs |= {w for w in m.group(1).split() if not w.startswith(("-", "/", "./"))}
    if not shutil.which("apt-cache"):
        raise Skip("no apt-cache: the packages cannot be checked")
    for pkg in sorted(pkgs):
        p = subprocess.run(["apt-cache", "show", "--no-all-versions", pkg],
                           capture_output=True, text=True)
        check(p.returncode == 0 and "Package:" in p.stdout, f"apt does not know {pkg}")
    # issue 37: the runtime stage installs the package make package built in the build stage
    # (its Depends bring the libraries; ctest install_package runs it from a fresh root).
    runtime = [ln for ln in lines if ln.startswith("RUN ") and "install" in ln][-1]
    debs = re.findall(r"(/\S*/ramforge_\*\.deb)", runtime)
    check(debs, f"the runtime stage installs no ramforge_*.deb: {runtime}")
    copied = [ln for ln in lines if ln.startswith("COPY --from=build ")]
    check(any(re.search(r"/tmp/build/ramforge_\*\.deb", ln) for ln in copied) and
          re.search(r"make package BUILD=/tmp/build\b", runs),
          f"the package is not the build stage's make package output: {copied}")
    link = re.search(r"ln -s (\S+) " + re.escape(IMAGE_LLAMA_SERVER), runs)
    check(link is not None, f"the Dockerfile links no {IMAGE_LLAMA_SERVER}")
    with open(os.path.join(SOURCE, "scripts", "make-deb.sh")) as f:
        maker = f.read()
    check(link.group(1) == "/usr/lib/ramforge/llama/bin/llama-server" and
          'cp "$llama/bin/llama-server" "$root/$priv/bin/"' in maker and
          "priv=usr/lib/ramforge/llama" in maker,
          f"{link.group(1)} is not the llama-server the package bundles")


def case_model_path(c):
    """One model file on the host across the units (MODEL=), the Dockerfile's `docker run -v
    HOST:/models` lines and each pod's hostPath volume mounted at /models."""
    found = {}
    for name in ("ramforge-serve.service", "ramforge-exec.service"):
        with open(os.path.join(DEPLOY, name)) as f:
            m = re.search(r"^Environment=MODEL=(\S+)$", f.read(), re.M)
        found[name] = m.group(1) if m else None
    with open(os.path.join(DEPLOY, "Dockerfile")) as f:
        text = f.read()
    inside = set(re.findall(r"-m (/models/\S+)", text))
    check(inside, "the Dockerfile names no /models/... model")
    for i, m in enumerate(re.finditer(r"-v (\S+):/models(?::ro)? ", text)):
        for model in inside:
            found[f"Dockerfile -v #{i + 1}"] = m.group(1) + model[len("/models"):]
    check(any(k.startswith("Dockerfile") for k in found), "the Dockerfile mounts no /models")
    try:
        docs = pods()
    except ImportError:
        raise Skip("python3-yaml is not installed")
    for pod in docs:
        spec = pod["spec"]
        hosts = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
        for ctr in spec["initContainers"] + spec["containers"]:
            mounts = {m["mountPath"]: m["name"] for m in ctr.get("volumeMounts", [])}
            for arg in ctr["command"]:
                if arg.endswith(".gguf"):
                    mnt = os.path.dirname(arg)
                    check(mnt in mounts and mounts[mnt] in hosts,
                          f"{pod['metadata']['name']}/{ctr['name']}: {arg} is on no hostPath")
                    found[f"{pod['metadata']['name']}/{ctr['name']}"] = os.path.join(
                        hosts[mounts[mnt]], os.path.basename(arg))
    check(all(v == HOST_MODEL for v in found.values()),
          f"the model on the host differs between files (want {HOST_MODEL}): {found}")
    print(f"{len(found)} places name {HOST_MODEL}")


CASES = {"units": case_units, "pod": case_pod, "dockerfile": case_dockerfile,
         "model_path": case_model_path}

if __name__ == "__main__":
    run_main(CASES, ModelCtx, "ramforge-deploy-")
