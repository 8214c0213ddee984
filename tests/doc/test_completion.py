#!/usr/bin/env python3
"""completions/ramforge.bash sourced in bash and its function called as bash would.

Usage: test_completion.py --ramforge BIN completion
       (the file: completions/ramforge.bash of this tree)

Each check sets COMP_WORDS/COMP_CWORD in `bash --norc`, calls the function
`complete -p ramforge` names, and compares COMPREPLY with the expected words:
subcommands, each subcommand's options (the same set its --help prints), an
option prefix, every enum option's values (each also named by --help, in the
separate-word, "--opt=value" and bash's split "--opt" "=" "value" forms), a
comma list, and files and directories for paths. Exit 0 pass, 1 fail.
"""
import os
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_man import COMMANDS, SOURCE, Ctx, check, help_options, run_main  # noqa: E402

COMPLETION = os.path.join(SOURCE, "completions", "ramforge.bash")

POLICIES = ["off", "observe", "conservative", "memory-bound", "reuse-aware", "active",
            "streaming"]
# (command, option, values): the enum values each --help documents.
ENUMS = [
    ("run", "--residency-policy", POLICIES),
    ("serve", "--residency-policy", POLICIES),
    ("run", "--release-mode", ["dontneed", "pageout"]),
    ("serve", "--release-mode", ["dontneed", "pageout"]),
    ("run", "--admission", ["enforce", "warn", "off"]),
    ("run", "--dead-file-pages", ["release", "keep"]),
    ("mkmodel", "--type", ["f32", "f16", "q8_0", "q4_0"]),
    ("mkmodel", "-T", ["f32", "f16", "q8_0", "q4_0"]),
    ("mkmodel", "--preset", ["tiny", "small", "tinyllama", "qwen3moe-small", "qwen3moe-a3b",
                             "qwen2moe-small"]),
    ("bench", "--conditions", ["warm", "isolated-nonresident"]),
    ("bench", "--policies", POLICIES),
    ("watch", "--release-mode", ["cold", "pageout"]),
    ("exec", "--residency-policy", POLICIES),
    ("exec", "--release-mode", ["dontneed", "pageout"]),
    ("exec", "--admission", ["enforce", "warn", "off"]),
]


class Bash:
    def __init__(self, completion, cwd):
        self.completion = completion
        self.cwd = cwd

    def complete(self, *words):
        """COMPREPLY for the command line `words`, the cursor at the end of the last word."""
        script = (f"source {shlex.quote(self.completion)} || exit 3\n"
                  "fn=$(complete -p ramforge | sed -n 's/.*-F \\([^ ]*\\).*/\\1/p')\n"
                  f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)})\n"
                  f"COMP_CWORD={len(words) - 1}\n"
                  "COMP_LINE=\"${COMP_WORDS[*]}\"; COMP_POINT=${#COMP_LINE}\n"
                  "$fn ramforge \"${COMP_WORDS[COMP_CWORD]}\" \"${COMP_WORDS[COMP_CWORD-1]}\"\n"
                  "printf '%s\\n' \"${COMPREPLY[@]}\"\n")
        p = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], capture_output=True,
                           text=True, cwd=self.cwd, timeout=30)
        check(p.returncode == 0 and not p.stderr,
              f"bash exited {p.returncode} completing {words}: {p.stderr}")
        return sorted(w for w in p.stdout.split("\n") if w)


def expect(b, words, want):
    got = b.complete(*words)
    check(got == sorted(want), f"completing {list(words)}: {got}, expected {sorted(want)}")


def case_completion(c):
    tree = os.path.join(c.tmp, "tree")
    os.makedirs(os.path.join(tree, "models"))
    for f in ("models/a.gguf", "models/b.gguf", "other.txt"):
        open(os.path.join(tree, f), "w").close()
    b = Bash(COMPLETION, tree)
    n = 0
    expect(b, ["ramforge", ""], COMMANDS)
    expect(b, ["ramforge", "s"], ["serve"])
    expect(b, ["ramforge", "-"], ["-h", "--help", "-V", "--version"])
    n += 3
    for cmd in COMMANDS:
        expect(b, ["ramforge", cmd, "-"], help_options(c.ramforge, cmd))
        n += 1
    expect(b, ["ramforge", "run", "--residency-rep"],
           ["--residency-report", "--residency-report-json"])
    expect(b, ["ramforge", "run", "-v", "--no-"],
           ["--no-repack", "--no-stream-hugepage", "--no-stream-prefetch",
            "--no-stream-sequential"])
    n += 2
    helps = {cmd: subprocess.run([c.ramforge, cmd, "--help"], capture_output=True,
                                 text=True).stdout for cmd in COMMANDS}
    for cmd, opt, values in ENUMS:
        for v in values:
            check(v in helps[cmd], f"{cmd} --help does not name {opt} value {v}")
        expect(b, ["ramforge", cmd, opt, ""], values)
        expect(b, ["ramforge", cmd, opt, values[-1][:2]],
               [v for v in values if v.startswith(values[-1][:2])])
        if opt.startswith("--"):
            expect(b, ["ramforge", cmd, opt + "=" + values[0]],
                   [v for v in values if v.startswith(values[0])])
            expect(b, ["ramforge", cmd, opt, "=", ""], values)
        n += 4
    expect(b, ["ramforge", "bench", "--conditions", "warm,"],
           ["warm,warm", "warm,isolated-nonresident"])
    expect(b, ["ramforge", "bench", "--policies", "off,memory-"], ["off,memory-bound"])
    # Paths: files for a model, directories for bench's output.
    expect(b, ["ramforge", "run", "-m", "models/"], ["models/a.gguf", "models/b.gguf"])
    expect(b, ["ramforge", "inspect", "--json", "mo"], ["models"])
    expect(b, ["ramforge", "mkmodel", "-o", "o"], ["other.txt"])
    expect(b, ["ramforge", "bench", "-m", "models/a.gguf", "-o", ""], ["models"])
    # inspect: -o takes a column list, -n no value (the model follows).
    expect(b, ["ramforge", "inspect", "--page-cache", "-o", "NAME,RES_"], ["NAME,RES_BYTES"])
    expect(b, ["ramforge", "inspect", "--page-cache", "-n", "models/"],
           ["models/a.gguf", "models/b.gguf"])
    expect(b, ["ramforge", "run", "-f", "o"], ["other.txt"])
    n += 3
    # A value that is text or a number: no option offered in its place.
    expect(b, ["ramforge", "run", "-p", "--res"], [])
    n += 7
    print(f"{n} completions checked")


if __name__ == "__main__":
    run_main({"completion": case_completion}, Ctx, "test-completion-")
