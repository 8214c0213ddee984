"""A Prometheus for a test: Debian's prometheus started on 127.0.0.1, scraping the given
targets every second into a temporary directory, answering PromQL through its HTTP API, and
always stopped; and promtool's `check metrics`. Used by tests/e2e/test_watch.py (watch
--listen), tests/preload/test_exec.py (exec --metrics-listen) and
tests/deploy/test_monitoring.py (the Grafana dashboard's queries).
"""
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_util import Failure, Skip, check, wait_for  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from serve_idle import free_port  # noqa: E402


@contextlib.contextmanager
def prometheus(tmp, targets):
    """Yields query(expr): the API's JSON answer to an instant query ({"status": "success",
    "data": ...} or {"status": "error", "error": ...} for a query that does not parse), None
    while Prometheus is not answering yet. targets: {job name: "127.0.0.1:port"}."""
    prom = shutil.which("prometheus")
    if not prom or not shutil.which("promtool"):
        raise Skip("Debian's prometheus (with promtool) is not installed "
                   "(scripts/install-deps.sh installs it)")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="rf-prom-", dir=tmp) as d:
        cfg = os.path.join(d, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\nscrape_configs:\n")
            for job, target in targets.items():
                f.write(f"  - job_name: {job}\n    static_configs:\n"
                        f"      - targets: ['{target}']\n")
        pr = subprocess.Popen([prom, f"--config.file={cfg}",
                               f"--storage.tsdb.path={os.path.join(d, 'data')}",
                               f"--web.listen-address=127.0.0.1:{port}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def query(expr):
            if pr.poll() is not None:
                raise Failure(f"prometheus exited with {pr.returncode}")
            url = (f"http://127.0.0.1:{port}/api/v1/query?"
                   f"query={urllib.parse.quote(expr)}")
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    return json.loads(r.read())
            except urllib.error.HTTPError as e:  # a bad query: 400 with the error in JSON
                try:
                    return json.loads(e.read())
                except ValueError:
                    return None  # not ready: a text answer
            except OSError:
                return None
        try:
            yield query
        finally:
            pr.terminate()
            pr.wait(30)


def prometheus_query(tmp, target, query, timeout=90):
    """A real Prometheus scraping target ("127.0.0.1:PORT", /metrics) every second until query
    returns a series (raises Failure after timeout): the result list. Skip: no prometheus."""
    with prometheus(tmp, {"ramforge": target}) as q:
        def scraped():
            r = q(query)
            return r and r.get("data", {}).get("result") or None
        return wait_for(scraped, timeout, f"prometheus to scrape {query}")


def promtool_check_metrics(body):
    """promtool's `check metrics` on the Prometheus text body (Skip: no promtool)."""
    promtool = shutil.which("promtool")
    if not promtool:
        raise Skip("Debian's prometheus (with promtool) is not installed "
                   "(scripts/install-deps.sh installs it)")
    p = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True,
                       text=True)
    check(p.returncode == 0, f"promtool check metrics: {p.stdout}{p.stderr}")
