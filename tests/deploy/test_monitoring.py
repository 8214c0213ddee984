#!/usr/bin/env python3
"""docs/monitoring/ (issue 24 item 6): the alert rules, the scrape configuration and the
Grafana dashboard, checked against promtool and against what ramforge exports.

  rules      `promtool check rules` on the alert rules and `promtool test rules` on
             monitoring-rules-test.yml (each alert fires on its series, not on a healthy one)
  scrape     `promtool check config` on the scrape configuration
  dashboard_live  every panel query run by a real Prometheus on 127.0.0.1 that scrapes a live
             `ramforge serve` and a `run --metrics-file` of the same model: each parses and
             returns data (NO_DATA names a panel without data and why)
  dashboard  the dashboard is JSON with a `model` variable; every panel query, Grafana's
             variables put in, parses (promtool check rules, as recording rules); every
             ramforge_* name in the queries and the rules is a family ramforge exports
             (run --metrics-file and serve's /metrics, read here); the other names are the
             container runtime's, listed in EXTERNAL

Usage: test_monitoring.py --ramforge BIN CASE.  Exit 0 pass, 1 fail, 77 skip (no promtool).
"""
import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from e2e_util import ModelCtx, Skip, check, memory_cgroup_v1, run_main, wait_for  # noqa: E402
from prom_util import prometheus  # noqa: E402
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
from watch_cost import free_port, get as http_json, healthy  # noqa: E402

SOURCE = os.path.normpath(os.path.join(HERE, "..", ".."))
MON = os.path.join(SOURCE, "docs", "monitoring")
EXTERNAL = {"container_oom_events_total"}  # cAdvisor's, as the kubelet exports it
# exec's engine only (llama-server under ramforge exec; tests/preload/test_exec_memory.py
# checks it): not in run's file or serve's /metrics
EXEC_ONLY = {"ramforge_exec_prompt_cache_limit_bytes"}


def promtool(*argv):
    if not shutil.which("promtool"):
        raise Skip("promtool is not installed (Debian: prometheus)")
    return subprocess.run(["promtool", *argv], capture_output=True, text=True, timeout=120)


def case_rules(c):
    p = promtool("check", "rules", os.path.join(MON, "prometheus-rules.yml"))
    check(p.returncode == 0, f"promtool check rules: {p.stdout}{p.stderr}")
    p = promtool("test", "rules", os.path.join(HERE, "monitoring-rules-test.yml"))
    check(p.returncode == 0 and "SUCCESS" in p.stdout, f"promtool test rules: {p.stdout}{p.stderr}")


def case_scrape(c):
    """promtool check config; and a job for each way ramforge exports (issue 37): serve's
    /metrics, exec's --metrics-listen on the port docs/deploy's exec unit gives it, watch's
    --listen, the textfile collector."""
    import yaml
    path = os.path.join(MON, "prometheus-scrape.yml")
    p = promtool("check", "config", path)
    check(p.returncode == 0, f"promtool check config: {p.stdout}{p.stderr}")
    with open(path) as f:
        jobs = {j["job_name"]: [t for sc in j.get("static_configs", []) for t in sc["targets"]]
                for j in yaml.safe_load(f)["scrape_configs"]}
    for job in ("ramforge-serve", "ramforge-exec", "ramforge-watch", "node-textfile"):
        check(jobs.get(job), f"the scrape configuration has no {job} job: {sorted(jobs)}")
    with open(os.path.join(SOURCE, "docs", "deploy", "ramforge-exec.service")) as f:
        listen = re.search(r"--metrics-listen (\S+)", f.read()).group(1)
    check(listen in jobs["ramforge-exec"], f"exec's unit listens on {listen}, the job scrapes "
                                           f"{jobs['ramforge-exec']}")
    ports = [t.rsplit(":", 1)[1] for ts in jobs.values() for t in ts]
    check(len(ports) == len(set(ports)), f"two jobs scrape one port: {jobs}")


def exported(c):
    """The metric families ramforge exports: run --metrics-file, serve's /metrics and watch
    --budget's --metrics-file over the serve process."""
    model = c.model()
    prom = c.path("run.prom")
    c.run("run", "-m", model, "-n", "2", "-q", "--metrics-file", prom)
    with open(prom) as f:
        text = f.read()
    proc = subprocess.Popen([c.rf, "serve", "-m", model, "--port", "0", "--metrics", "-q"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        check("serving" in line, f"serve did not start: {line!r}")
        port = int(line.rsplit(":", 1)[1].strip().strip("/"))
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as r:
            text += r.read().decode()
        watched = c.path("watch.prom")
        c.run("watch", "-n", "2", "-i", "0.1", "--json", "--budget", "1GiB", "--metrics-file",
              watched,
              str(proc.pid))
        with open(watched) as f:
            text += f.read()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    return set(re.findall(r"^# TYPE (\S+) ", text, re.M))


def names(expr):
    """Metric names of a PromQL expression (identifiers followed by { [ or an operator that
    are not functions, keywords or label names)."""
    expr = re.sub(r'"[^"]*"', '""', expr)  # label values
    expr = re.sub(r"\{[^}]*\}", "{}", expr)  # matchers: their label names are not metrics
    words = set(re.findall(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()", expr))
    keywords = {"on", "ignoring", "by", "without", "and", "or", "unless", "bool",
                "group_left", "group_right", "offset", "model", "category", "m", "h", "s",
                "d", "w", "y", "ms", "e"}
    words = {w for w in words if w not in keywords and not re.fullmatch(r"\d+\w*", w)}
    return {w for w in words if w.startswith(("ramforge_", "container_", "llamacpp"))}


def case_dashboard(c):
    with open(os.path.join(MON, "grafana-dashboard.json")) as f:
        dash = json.load(f)
    variables = {v["name"] for v in dash["templating"]["list"]}
    check({"datasource", "model"} <= variables, f"dashboard variables {variables}")
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    check(len(exprs) >= 8, f"{len(exprs)} queries")
    rules = ["groups:", "  - name: dashboard", "    rules:"]
    for i, e in enumerate(exprs):
        q = e.replace("$__rate_interval", "5m").replace("$model", ".*")
        rules += [f"      - record: dashboard:query{i}", f"        expr: {json.dumps(q)}"]
    path = c.path("dashboard-rules.yml")
    with open(path, "w") as f:
        f.write("\n".join(rules) + "\n")
    p = promtool("check", "rules", path)
    check(p.returncode == 0, f"a dashboard query does not parse: {p.stdout}{p.stderr}")
    with open(os.path.join(MON, "prometheus-rules.yml")) as f:
        rule_exprs = re.findall(r"expr: \|?\s*\n?((?:.+\n)+?)\s*(?:labels|for):", f.read())
    used = set()
    for e in exprs + rule_exprs:
        used |= names(e.replace("$__rate_interval", "5m"))
    have = exported(c)
    missing = sorted(n for n in used - EXTERNAL - EXEC_ONLY if n not in have)
    check(not missing, f"queried but not exported by ramforge: {missing}")
    check(used & have, "no query names a ramforge metric")


# Panels with no data in dashboard_live's setup, each with the reason (a panel added without
# data there must be named here, or the test fails).
NO_DATA = {"llama-server's host prompt cache (exec): the ledger's PromptCache, its bound, the "
           "room": "run and serve save no sequence state: PromptCache is unknown there, and the "
           "bound is exec's (test_exec_memory.py's server_prompt_cache_ledger reads both)",
           "Byte budget (watch --budget): budget, held, headroom, released per process":
           "no watch --budget in this setup (its families: the dashboard case, from a watch "
           "over serve)"}


class _File(http.server.BaseHTTPRequestHandler):
    """Serves run's --metrics-file at /metrics, as node_exporter's textfile collector would."""
    path_to_serve = None

    def do_GET(self):
        with open(self.path_to_serve, "rb") as f:
            body = f.read()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def limit_args():
    """--memory-limit 1Gi where root can make a memory cgroup (the limit panels' series),
    else nothing."""
    try:
        memory_cgroup_v1()
    except Skip as e:
        print(f"note: no --memory-limit ({e}): the limit panels have no data")
        NO_DATA.update({"Room before the limit": "no memory limit (no memory cgroup here)"})
        return []
    return ["--memory-limit", "1Gi"]


def case_dashboard_live(c):
    """Every panel query of the dashboard run by a real Prometheus (127.0.0.1, scraping every
    second) against a live `ramforge serve` (memory-bound with idle releases, in a cgroup of
    its own under --memory-limit) and a `run --metrics-file` of the same model served over
    HTTP: each query parses and returns data, except NO_DATA's panels, each with its reason;
    $model is .*, $__rate_interval 1m."""
    with open(os.path.join(MON, "grafana-dashboard.json")) as f:
        dash = json.load(f)
    panels = [(p["title"], t["expr"]) for p in dash["panels"] for t in p["targets"]]
    model, limit = c.model(), limit_args()
    prom = c.path("run.prom")
    c.run("run", "-m", model, "-n", "4", "-t", "1", "-q", "--metrics-file", prom, *limit)
    _File.path_to_serve = prom
    files = http.server.HTTPServer(("127.0.0.1", 0), _File)
    threading.Thread(target=files.serve_forever, daemon=True).start()
    port = free_port()
    helptext = subprocess.run([c.rf, "serve", "--help"], capture_output=True, text=True).stdout
    metrics = ["--metrics"] if re.search(r"^\s*--metrics\b", helptext, re.M) else []
    srv = subprocess.Popen([c.rf, "serve", "-m", model, "--port", str(port), "-t", "1", "-q",
                            "--residency-policy", "memory-bound", "--memory-target", "1Mi",
                            "--idle-seconds", "1", *limit, *metrics],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: srv.poll() is not None or healthy(f"{base}/health"), 120, "serve")
        check(srv.poll() is None, f"serve exited with {srv.returncode}")
        for _ in range(2):
            http_json(f"{base}/completion", {"prompt": "Hello my name is", "n_predict": 4})
        wait_for(lambda: re.search(r"^ramforge_idle_boundaries_total [1-9]",
                                   urllib.request.urlopen(f"{base}/metrics", timeout=10)
                                   .read().decode(), re.M), 60, "an idle release")
        targets = {"ramforge-serve": f"127.0.0.1:{port}",
                   "ramforge-run": f"127.0.0.1:{files.server_address[1]}"}
        with prometheus(c.tmp, targets) as query:
            # both targets up, with enough scrapes for a rate over 1m
            wait_for(lambda: (r := query("count_over_time(up[1m]) >= 3 and up == 1")) and
                     len(r["data"]["result"]) == 2, 120, "three scrapes of both targets")
            http_json(f"{base}/completion", {"prompt": "Hello", "n_predict": 2})
            failed = []
            for title, expr in panels:
                q = expr.replace("$__rate_interval", "1m").replace("$model", ".*")
                r = wait_for(lambda: query(q), 30, f"an answer to {q}")
                if r["status"] != "success":
                    failed.append(f"{title}: {q}: does not run: {r.get('error')}")
                elif not r["data"]["result"] and title not in NO_DATA:
                    failed.append(f"{title}: {q}: no data")
                else:
                    print(f"{title}: {len(r['data']['result'])} series "
                          f"{NO_DATA.get(title, '')}")
            check(not failed, "dashboard queries:\n" + "\n".join(failed))
    finally:
        if srv.poll() is None:
            srv.terminate()
        srv.wait(60)
        files.shutdown()
        files.server_close()


CASES = {"rules": case_rules, "scrape": case_scrape, "dashboard": case_dashboard,
         "dashboard_live": case_dashboard_live}

if __name__ == "__main__":
    run_main(CASES, ModelCtx, "ramforge-monitoring-")
