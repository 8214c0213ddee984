#!/usr/bin/env python3
"""The size rule (issue 24 item 4; Kubernetes' exactly, s24read item 7): one sentence, RF_SIZE_RULE of
src/include/ramforge/core/policy.h, printed the same by `ramforge run --help` and
`ramforge inspect --help`, in doc/ramforge.1 and in docs/guide/README.md (white space
and roff escapes aside); and the rule itself on the command line: a pod
spec's 2G is 2,000,000,000 bytes, 2Gi is 2 GiB, 1e9 is 10^9, as the fit
check's JSON gives them in bytes; what Kubernetes refuses (2GB, 512K) or
reads otherwise (300m, milli) is refused with the spelling to use.

Usage: test_size_rule.py --ramforge BIN CASE     (CASE: sentence, parse)
Exit 0 pass, 1 fail, 77 skip.
"""
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from e2e_util import ModelCtx, check, run_main  # noqa: E402

SOURCE = os.path.normpath(os.path.join(HERE, "..", ".."))


def flat(text):
    return re.sub(r"\s+", " ", text).strip()


def rule():
    """RF_SIZE_RULE's text: the C string literals of the macro, joined."""
    with open(os.path.join(SOURCE, "src", "include", "ramforge", "core", "policy.h")) as f:
        header = f.read()
    m = re.search(r"#define RF_SIZE_RULE((?:[^\n]*\\\n)*[^\n]*)", header)
    check(m is not None, "policy.h has no RF_SIZE_RULE")
    return "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1)))


def case_sentence(c):
    """The sentence, word for word, in both --help texts, the man page and the user guide's index."""
    want = flat(rule())
    check(want.startswith("SIZE is bytes") and "Kubernetes" in want, want)
    for cmd in ("run", "inspect"):
        out = subprocess.run([c.rf, cmd, "--help"], capture_output=True, text=True,
                             timeout=60).stdout
        check(want in flat(out), f"ramforge {cmd} --help lacks the size rule:\n{want}")
    with open(os.path.join(SOURCE, "doc", "ramforge.1")) as f:
        man = f.read().replace("\\-", "-")
    man = re.sub(r"\\f[BIRP]", "", man)
    check(want in flat(man), "doc/ramforge.1 lacks the size rule")
    with open(os.path.join(SOURCE, "docs", "guide", "README.md")) as f:
        check(want in flat(f.read()), "docs/guide/README.md lacks the size rule")


def case_parse(c):
    """K, M, G decimal and Ki, Mi, Gi binary, as the fit check's JSON gives them in bytes;
    the summary header's target is printed in bytes too."""
    model = c.model()
    for size, want in (("2G", 2000000000), ("2Gi", 2 << 30), ("1.5Gi", 3 << 29),
                       ("300M", 300000000), ("300MiB", 300 << 20), ("512k", 512000),
                       ("1e9", 10 ** 9), (".5Gi", 1 << 29), ("2", 2)):
        p = subprocess.run([c.rf, "inspect", "-c", "256", "--memory-limit", size,
                            "--admission", "off", "--json", model],
                           capture_output=True, text=True, timeout=120)
        check(p.returncode == 0, f"--memory-limit {size}: exit {p.returncode}: {p.stderr}")
        got = json.loads(p.stdout)["memory_limit_bytes"]
        check(got == want, f"--memory-limit {size}: {got} bytes, want {want}")
    # what Kubernetes refuses or reads otherwise: one line with the spelling to use, exit 2
    for size, hint in (("2GB", "write 2G (decimal) or 2Gi (binary)"),
                       ("512K", "write 512k (decimal) or 512Ki (binary)"),
                       ("300m", "m is milli (thousandths of a byte) in Kubernetes"),
                       ("2gi", "write 2Gi (suffixes are case-sensitive"),
                       ("1.5", "not a whole number of bytes")):
        p = subprocess.run([c.rf, "inspect", "-c", "256", "--memory-limit", size, model],
                           capture_output=True, text=True, timeout=120)
        first = p.stderr.splitlines()[:1]
        check(p.returncode == 2 and first and
              first[0].startswith(f"ramforge: invalid size for --memory-limit '{size}': ") and
              hint in first[0] and not p.stdout, f"--memory-limit {size}: {p.returncode} "
              f"{p.stderr!r}")
    p = subprocess.run([c.rf, "run", "-m", model, "-n", "2", "--memory-target", "300M"],
                       capture_output=True, text=True, timeout=300)
    check(p.returncode == 0 and "target 286.10 MiB (300000000 bytes)" in p.stderr,
          f"the summary does not give the target in bytes:\n{p.stderr[-600:]}")


CASES = {"sentence": case_sentence, "parse": case_parse}

if __name__ == "__main__":
    run_main(CASES, ModelCtx, "ramforge-size-")
