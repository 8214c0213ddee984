#!/usr/bin/env python3
"""docs/monitoring/ (issue 24 item 6): the alert rules, the scrape configuration and the
Grafana dashboard, checked against promtool and against what ramforge exports.

  rules      `promtool check rules` on the alert rules and `promtool test rules` on
             monitoring-rules-test.yml (each alert fires on its series, not on a healthy one)
  scrape     `promtool check config` on the scrape configuration
  dashboard  the dashboard is JSON with a `model` variable; every panel query, Grafana's
             variables put in, parses (promtool check rules, as recording rules); every
             ramforge_* name in the queries and the rules is a family ramforge exports
             (run --metrics-file and serve's /metrics, read here); the other names are the
             container runtime's, listed in EXTERNAL

Usage: test_monitoring.py --ramforge BIN CASE.  Exit 0 pass, 1 fail, 77 skip (no promtool).
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from e2e_util import ModelCtx, Skip, check, run_main  # noqa: E402

SOURCE = os.path.normpath(os.path.join(HERE, "..", ".."))
MON = os.path.join(SOURCE, "docs", "monitoring")
EXTERNAL = {"container_oom_events_total"}  # cAdvisor's, as the kubelet exports it


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
    p = promtool("check", "config", os.path.join(MON, "prometheus-scrape.yml"))
    check(p.returncode == 0, f"promtool check config: {p.stdout}{p.stderr}")


def exported(c):
    """The metric families ramforge exports: run --metrics-file and serve's /metrics."""
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
    missing = sorted(n for n in used - EXTERNAL if n not in have)
    check(not missing, f"queried but not exported by ramforge: {missing}")
    check(used & have, "no query names a ramforge metric")


CASES = {"rules": case_rules, "scrape": case_scrape, "dashboard": case_dashboard}

if __name__ == "__main__":
    run_main(CASES, ModelCtx, "ramforge-monitoring-")
