#!/usr/bin/python3
"""The llama-server that llama.cpp's server test-suite starts (LLAMA_SERVER_BIN_PATH),
offline and in one of three modes (RAMFORGE_SUITE_MODE):

  bare   the pinned llama-server itself
  exec   ramforge exec OPTS -- llama-server ...   (OPTS: RAMFORGE_SUITE_EXEC_OPTS, split as
         a shell would)
  serve  ramforge serve --prompt-cache (llama-server keeps each slot's prompt cache by
         default), with llama-server's flags mapped onto serve's; a flag serve has
         no equivalent of makes the wrapper exit 2 naming it (and append the line to
         RAMFORGE_SUITE_REFUSALS when set), unless RAMFORGE_SUITE_SERVE_DROP (a comma-
         separated list of flags) names it: then it is dropped, to see what else fails

The suite's presets name Hugging Face models (--hf-repo, --hf-file, --model-url); those
flags are dropped and -m RAMFORGE_SUITE_MODEL (a generated model) is given instead.
--offline is dropped too (nothing is downloaded). RAMFORGE_SUITE_LLAMA_SERVER and
RAMFORGE_SUITE_RAMFORGE are the two binaries. The wrapper execs the server, so the
suite's SIGTERM reaches it directly.
"""
import os
import shlex
import sys

# llama-server's flags that take a value and name a model to download.
DOWNLOAD_FLAGS = {"--hf-repo", "-hf", "-hfr", "--hf-file", "-hff", "--model-url", "-mu"}
MODEL_FLAGS = {"-m", "--model"}

# llama-server flag -> serve flag (same meaning; the value, if any, is passed as is).
SERVE_SAME = {
    "-m": "-m", "--model": "-m", "--host": "--host", "--port": "--port",
    "-c": "-c", "--ctx-size": "-c", "-n": "-n", "--n-predict": "-n",
    "-t": "-t", "--threads": "-t", "--api-key": "--api-key", "--verbose": "-v",
}
# llama-server flags serve may take under the same name (serve's --help is asked).
SERVE_MAYBE = {"--seed", "--temp", "--alias", "--tags", "--cors-origins", "--parallel",
               "--batch-size", "--ubatch-size", "--metrics", "--slots", "--no-slots",
               "--jinja", "--no-jinja", "--sleep-idle-seconds", "--embedding",
               "--no-ui", "--chat-template", "--cont-batching", "--backend_sampling"}
# Flags whose meaning serve already has without the flag: (flag, value or None, why).
SERVE_ALREADY = {
    ("--no-slots", None): "serve has no /slots endpoint, as llama-server with --no-slots",
    ("--no-jinja", None): "serve applies no Jinja template, as llama-server with --no-jinja",
    ("--temp", "0.8"): "serve's default temperature is 0.8",
    ("--parallel", "1"): "serve has one slot",
}
# llama-server flags without a value (the suite's utils.py passes these bare).
NO_VALUE = {"--offline", "--cont-batching", "--embedding", "--reranking", "--metrics",
            "--kv-unified", "--swa-full", "--slots", "--no-slots", "--verbose",
            "--context-shift", "--no-ui", "--no-models-autoload", "--jinja", "--no-jinja",
            "--no-mmproj", "--no-cache-idle-slots", "--ui-mcp-proxy", "--backend_sampling"}


def fail(msg):
    line = f"server_wrapper: {msg}"
    print(line, file=sys.stderr)
    log = os.environ.get("RAMFORGE_SUITE_REFUSALS")
    if log:
        with open(log, "a") as f:
            f.write(line + "\n")
    sys.exit(2)


def env(name):
    v = os.environ.get(name)
    if not v:
        fail(f"{name} is not set")
    return v


def split_flags(args):
    """[(flag, value or None)] from llama-server's argv (the suite's --flag value form)."""
    out, i = [], 0
    while i < len(args):
        a = args[i]
        if a in NO_VALUE or i + 1 == len(args) or not a.startswith("-"):
            out.append((a, None))
            i += 1
        else:
            out.append((a, args[i + 1]))
            i += 2
    return out


def offline(flags):
    """The flags with the downloads and --offline replaced by -m the generated model."""
    wanted = any(f in DOWNLOAD_FLAGS for f, _ in flags)
    has_model = any(f in MODEL_FLAGS for f, _ in flags)
    kept = [(f, v) for f, v in flags if f not in DOWNLOAD_FLAGS and f != "--offline"]
    if wanted and not has_model:
        kept.append(("-m", env("RAMFORGE_SUITE_MODEL")))
    return kept


def serve_flags(rf, flags):
    """ramforge serve's argv for llama-server's flags, or exit 2 naming the first flag
    serve has nothing for."""
    import subprocess
    helptext = subprocess.run([rf, "serve", "--help"], capture_output=True, text=True).stdout
    argv = [rf, "serve"]
    drop = set(filter(None, os.environ.get("RAMFORGE_SUITE_SERVE_DROP", "").split(",")))
    for f, v in flags:
        if f in drop:
            continue
        if f in SERVE_SAME:
            argv += [SERVE_SAME[f]] + ([v] if v is not None else [])
        elif f in SERVE_MAYBE and (f"{f} " in helptext or f"{f}\n" in helptext):
            argv += [f] + ([v] if v is not None else [])
        elif (f, v) in SERVE_ALREADY:
            continue
        else:
            shown = f if v is None else f"{f} {v}"
            fail(f"ramforge serve has no equivalent of llama-server's {shown}")
    if not any(f in MODEL_FLAGS for f, _ in flags):
        fail("ramforge serve needs a model (-m); llama-server's router mode has no equivalent")
    if "--prompt-cache" in helptext:
        argv.append("--prompt-cache")  # llama-server caches each slot's prompt by default
    return argv


def main():
    mode = os.environ.get("RAMFORGE_SUITE_MODE", "bare")
    flags = offline(split_flags(sys.argv[1:]))
    args = [x for f, v in flags for x in ((f,) if v is None else (f, v))]
    if mode == "bare":
        argv = [env("RAMFORGE_SUITE_LLAMA_SERVER")] + args
    elif mode == "exec":
        opts = shlex.split(os.environ.get("RAMFORGE_SUITE_EXEC_OPTS", ""))
        argv = [env("RAMFORGE_SUITE_RAMFORGE"), "exec", *opts, "--",
                env("RAMFORGE_SUITE_LLAMA_SERVER")] + args
    elif mode == "serve":
        argv = serve_flags(env("RAMFORGE_SUITE_RAMFORGE"), flags)
    else:
        fail(f"unknown mode '{mode}' (RAMFORGE_SUITE_MODE: bare, exec or serve)")
    sys.stdout.flush()
    os.execv(argv[0], argv)


if __name__ == "__main__":
    main()
