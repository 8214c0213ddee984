#!/usr/bin/env python3
"""`make package`'s .deb (scripts/make-deb.sh, issue 37) built from this build and installed
into a fresh root.

Usage: test_package.py --build-dir DIR --source-dir DIR --cc BIN --ramforge BIN
                       --llama-prefix DIR

The fresh root is an empty directory the package is unpacked into with `dpkg -x` (what
dpkg --install unpacks, without its database and scripts: the package has none); a
debootstrap chroot needs the network, which this machine does not have. The test checks the
control file (Depends from dpkg-shlibdeps, no llama.cpp package named, the bundled build
described), that no file of the package names the build machine's llama.cpp prefix in an
RPATH, pkg-config or CMake file, and then, from the root only (LD_LIBRARY_PATH unset):
`ramforge --version` loads the bundled libllama; `ramforge inspect` and `ramforge run` on a
generated model; `ramforge exec` finds its preload libraries; examples/embed.c compiled with
the installed headers and `pkg-config --cflags --libs ramforge` runs and gives the tokens of
`ramforge run`. Exit 0 pass, 1 fail, 77 skip (no dpkg-deb, patchelf or llama.cpp prefix).
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from e2e_util import SKIP, Failure, Skip, asan_build, check  # noqa: E402

PROMPT = "Hello my name is"


def run(argv, **kw):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=600, **kw)
    check(p.returncode == 0, f"{' '.join(argv)} exited {p.returncode}:\n{p.stdout}{p.stderr}")
    return p


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD", "PKG_CONFIG_PATH")}
    env.update(extra)
    return env


def test(a, tmp):
    for tool in ("dpkg-deb", "patchelf", "dpkg-shlibdeps", "fakeroot"):
        if not shutil.which(tool):
            raise Skip(f"{tool} is not installed (scripts/install-deps.sh)")
    if asan_build(a.ramforge):
        raise Skip("an ASan build (make asan): a package is made of the plain build")
    if not a.llama_prefix or not os.path.isdir(os.path.join(a.llama_prefix, "lib")):
        raise Skip("no llama.cpp prefix to bundle (a build against find_package/pkg-config)")
    deb = run([os.path.join(a.source_dir, "scripts", "make-deb.sh"), a.build_dir,
               a.llama_prefix, tmp]).stdout.strip().splitlines()[-1]
    check(re.fullmatch(r".*/ramforge_\d+\.\d+\.\d+_\w+\.deb", deb), f"package name {deb}")
    info = run(["dpkg-deb", "-f", deb, "Package", "Depends", "Description"]).stdout
    deps = re.search(r"^Depends: (.*)$", info, re.M).group(1)
    for want in ("libjansson4", "libnettle8", "libmicrohttpd12", "libc6"):
        check(want in deps, f"Depends lacks {want}: {deps}")
    check("llama" not in deps, f"a llama.cpp package in Depends: {deps}")
    check("/usr/lib/ramforge/llama" in info and "bundled" in info,
          f"the description does not say which llama.cpp and where: {info}")
    root = os.path.join(tmp, "root")
    os.mkdir(root)
    run(["dpkg", "-x", deb, root])
    usr = os.path.join(root, "usr")
    for rel in ("bin/ramforge", "include/ramforge/session.h", "include/ramforge/error.h",
                "include/ramforge/types.h", "share/man/man1/ramforge.1",
                "share/bash-completion/completions/ramforge", "lib/ramforge/llama/include/llama.h",
                "share/doc/ramforge/README.md", "share/doc/ramforge/guide/run.md"):
        check(os.path.exists(os.path.join(usr, rel)), f"the package lacks /usr/{rel}")
    for pattern in ("lib/libramforge.so.*", "lib/libramforge.a", "lib/libramforge-exec.so",
                    "lib/libramforge-preload.so", "lib/pkgconfig/ramforge.pc",
                    "lib/cmake/ramforge/ramforgeConfig.cmake", "lib/ramforge/llama/lib/libllama.so*"):
        check(glob.glob(os.path.join(usr, pattern)), f"the package lacks /usr/{pattern}")
    # Nothing of the package leads back to this machine's llama.cpp build.
    prefix = os.path.realpath(a.llama_prefix)
    for dirpath, _, files in os.walk(usr):
        for f in files:
            path = os.path.join(dirpath, f)
            if os.path.islink(path):
                continue
            with open(path, "rb") as fh:
                if fh.read(4) == b"\x7fELF":
                    dyn = run(["readelf", "-d", path]).stdout
                    check(prefix not in dyn, f"{path} names {prefix}: {dyn}")
            if f.endswith((".pc", ".cmake")):
                with open(path) as fh:
                    check(prefix not in fh.read(), f"{path} names {prefix}")
    env = clean_env()
    rf = os.path.join(usr, "bin", "ramforge")
    out = run([rf, "--version"], env=env).stdout
    lib = re.search(r"^libllama loaded from (.*)$", out, re.M)
    check(lib and lib.group(1).startswith(os.path.join(usr, "lib", "ramforge", "llama", "lib")),
          f"--version does not load the bundled libllama: {out}")
    check(re.search(r"^llama\.cpp: .*scripts/build-llama\.sh", out, re.M),
          f"--version does not say where its llama.cpp comes from: {out}")
    model = os.path.join(tmp, "tiny.gguf")
    run([a.ramforge, "mkmodel", "-P", "tiny", "-T", "q8_0", "-q", "-o", model])
    out = run([rf, "inspect", "-c", "256", "--memory-limit", "1Gi", model], env=env).stdout
    check(out.startswith("in a container with a 1.00 GiB memory limit: fits"), out)
    rpath = os.path.join(tmp, "run.json")
    run([rf, "run", "-m", model, "-p", PROMPT, "-n", "8", "--residency-report-json", rpath],
        env=env)
    with open(rpath) as f:
        tokens = " ".join(str(t) for t in json.load(f)["output"]["token_ids"])
    p = run([rf, "exec", "--", "/bin/true"], env=env)
    # The embedder, against the installed headers and ramforge.pc only.
    pc_env = clean_env(PKG_CONFIG_PATH=os.path.join(usr, "lib", "pkgconfig"))
    flags = run(["pkg-config", "--cflags", "--libs", "ramforge"], env=pc_env).stdout.split()
    check(all(prefix not in f for f in flags), f"pkg-config names {prefix}: {flags}")
    embed = os.path.join(tmp, "embed")
    run([a.cc, "-std=c11", "-Wall", "-Wextra", "-Werror",
         os.path.join(a.source_dir, "examples", "embed.c"), *flags, "-o", embed])
    report = os.path.join(tmp, "embed.json")
    p = run([embed, model, PROMPT, "8", report], env=env)
    ldd = run(["ldd", embed], env=env).stdout
    check(re.search(r"libllama\.so\.\d+ => " + re.escape(usr), ldd),
          f"embed does not load the bundled libllama:\n{ldd}")
    check(os.path.exists(report), "embed wrote no report")
    check(p.stdout.split() == tokens.split(),
          f"embed's tokens {p.stdout!r} are not ramforge run's {tokens!r}")
    print(f"{os.path.basename(deb)}: Depends {deps}; installed into {root}: --version, "
          f"inspect, run, exec and the embedder ran from it")


def main():
    ap = argparse.ArgumentParser()
    for opt in ("--build-dir", "--source-dir", "--cc", "--ramforge"):
        ap.add_argument(opt, required=True)
    ap.add_argument("--llama-prefix", default="")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ramforge-deb-", dir=a.build_dir) as tmp:
        try:
            test(a, tmp)
        except Skip as e:
            print(f"SKIP: {e}")
            return SKIP
        except Failure as e:
            print(f"FAIL: {e}")
            return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
