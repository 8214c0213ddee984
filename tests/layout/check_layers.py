#!/usr/bin/env python3
"""The layer rules of docs/ARCHITECTURE.md, read from every #include.

Every .c, .cpp and .h file under src/, tools/ and include/ of the tree ROOT is
read; each #include it holds must not cross a layer upward and must not reach a
private header of another layer:

  core     includes only core
  sys      includes only core and sys
  forge    includes only core, sys and forge
  session  includes core, sys, forge and session (never preload or tools)
  preload  includes core, sys, forge, session and preload (never tools)
  tools    includes any layer
  llama.cpp, ggml and gguf headers are included only from src/forge/ and by
  exec's shim (src/preload/exec_shim.c, LLAMA_INCLUDERS).
  A seam inside a layer (ONLY_INCLUDED_BY): serve's worker header is included
  only by serve's main and the worker, never by its HTTP front.

A file's layer is its directory (src/core, src/sys, src/forge, src/session,
tools). A header of an include dir, include/ or an internal one under src/
(src/include/, or any src/ dir holding a ramforge/ dir; all reached as
"ramforge/x.h"), belongs to the layer that defines the functions it declares;
a header that declares no function defined in the tree (types and macros
only) takes its layer from LAYER_OF_HEADER below or, when not named there,
the highest layer of the project headers it includes (core if none).
An internal header lives in its layer's folder, src/include/ramforge/<layer>/
(reached as "ramforge/<layer>/x.h"); one outside it, or in another layer's
folder, is a violation. A header in a layer's own directory (src/core/report_json.h,
src/forge/forge_internal.h, ...) is private to that layer.

Each violation is printed as one line, `file:line: rule`; the exit status is 1
when there is one, 0 when there is none.
Usage: check_layers.py ROOT [--map]   (--map: print each header's layer first)
"""

import argparse
import os
import re
import sys

# Lowest first: a layer may include itself and the layers before it.
LAYERS = ("core", "sys", "forge", "session", "preload", "tools")
RANK = {name: i for i, name in enumerate(LAYERS)}

# Headers of an include dir that declare no function defined in the tree and
# belong higher than their own includes say: their layer, by who owns them.
LAYER_OF_HEADER = {
    "defaults.h": "tools",  # the programs' defaults (the prompt): no library code uses them
    "forge_exec.h": "preload",  # the seam of ramforge exec's shim and engine (both preload)
}
# The files outside src/forge that include llama.cpp's headers: exec's shim, beside its engine,
# for the types of the calls it interposes (it links no libllama: dlsym RTLD_NEXT).
LLAMA_INCLUDERS = {os.path.join("src", "preload", "exec_shim.c")}

# Headers only the files named may include: a seam inside a layer. serve's worker
# (library ramforge_serve_worker) is reached only from serve's main, which wires it to the
# HTTP front (library ramforge_serve_http); the front never calls into the worker.
ONLY_INCLUDED_BY = {
    os.path.join("tools", "serve", "serve_worker.h"): (
        os.path.join("tools", "serve", "cmd_serve.c"),
        os.path.join("tools", "serve", "serve_worker.c")),
}

# llama.cpp's headers (llama.h, llama-ext.h, llama-model.h, ...), ggml's
# (ggml.h, ggml-backend.h, ...) and gguf.h.
LLAMA_HEADER = re.compile(r"^(?:.*/)?(?:llama|ggml|gguf)(?:[-_.][\w.-]*)?\.h$")
# The headers of llama.cpp's common library (its common/ and common/jinja/, installed by
# scripts/build-llama-server.sh into the prefix's share/ramforge/llama-common-headers).
COMMON_HEADERS = frozenset("""
arg.h build-info.h chat-auto-parser-helpers.h chat-auto-parser.h chat-peg-parser.h chat.h
common.h console.h debug.h download.h fit.h hf-cache.h
http.h imatrix-loader.h json-schema-to-grammar.h json-schema.h json.h log.h
ngram-cache.h ngram-map.h ngram-mod.h peg-parser.h preset.h reasoning-budget.h
sampling.h speculative.h subproc.h trie.h unicode.h
""".split())

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
SOURCE_SUFFIXES = (".c", ".cpp", ".h")
# Words that are followed by '(' but are not the name of a declared function.
NOT_FUNCTIONS = {"if", "for", "while", "switch", "return", "sizeof", "defined",
                 "__attribute__", "alignof", "_Alignof", "_Static_assert",
                 "static_assert", "typeof", "__typeof__"}


def llama_header(name):
    """True for a header of llama.cpp, ggml, gguf or llama.cpp's common library."""
    return bool(LLAMA_HEADER.match(name)) or name in COMMON_HEADERS or name.startswith("jinja/")


def strip_comments(text):
    """text with comments and string literals blanked (line breaks kept)."""
    def blank(m):
        s = m.group(0)
        if s.startswith("/"):
            return re.sub(r"[^\n]", " ", s)
        return s[0] + " " * (len(s) - 2) + s[-1]
    return re.sub(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                  blank, text, flags=re.S)


def without_macros(text):
    """text with #-directives (and their continuation lines) blanked."""
    out, cont = [], False
    for line in text.split("\n"):
        directive = cont or line.lstrip().startswith("#")
        cont = directive and line.rstrip().endswith("\\")
        out.append("" if directive else line)
    return "\n".join(out)


def declared_functions(text):
    """Names the header declares as functions (prototypes ending in ';')."""
    code = without_macros(strip_comments(text))
    names = set()
    for m in re.finditer(r"\b([A-Za-z_]\w*)\s*\(([^;{}]*)\)\s*(?:__attribute__\s*\(\(.*?\)\)\s*)?;",
                         code, flags=re.S):
        name = m.group(1)
        if name not in NOT_FUNCTIONS:
            names.add(name)
    return names


def defined_functions(text):
    """Names the source file defines as external functions (a parameter list,
    then '{'; static ones are not reached from a header)."""
    code = without_macros(strip_comments(text))
    names = set()
    for m in re.finditer(r"\b([A-Za-z_]\w*)\s*\((?:[^(){};]|\([^(){};]*\))*\)\s*\{", code):
        start = max(code.rfind(c, 0, m.start()) for c in ";{}")
        if m.group(1) not in NOT_FUNCTIONS and not re.search(r"\bstatic\b",
                                                                code[start + 1:m.start()]):
            names.add(m.group(1))
    return names


def includes(text):
    """(line number, quote, name) of each #include of text."""
    for lineno, line in enumerate(text.split("\n"), 1):
        m = INCLUDE.match(line)
        if m:
            yield (lineno,) + m.groups()


class Tree:
    """The files of ROOT's src/, tools/ and include/, each with its layer."""

    def __init__(self, root):
        self.root = root
        self.files = []  # relative paths, sorted
        for top in ("src", "tools", "include"):
            for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
                dirnames.sort()
                for f in sorted(filenames):
                    if f.endswith(SOURCE_SUFFIXES):
                        self.files.append(os.path.relpath(os.path.join(dirpath, f), root))
        # Where "ramforge/x.h" may live: include/ and any internal include dir.
        layer_dirs = {os.path.join("src", layer) for layer in LAYERS}
        self.header_dirs = ["include"] + sorted(
            os.path.relpath(d, root)
            for d, dirnames, _ in os.walk(os.path.join(root, "src"))
            if os.path.basename(d) == "include" or (
                "ramforge" in dirnames and os.path.relpath(d, root) not in layer_dirs))
        self.text = {}
        for rel in self.files:
            with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
                self.text[rel] = f.read()
        self.problems = []  # (file, line, message) of the mapping itself
        self.header_layer = self._map_headers()

    def dir_layer(self, rel):
        """(layer, private) of a file by its directory; (None, False) in an include dir."""
        parts = rel.split(os.sep)
        if self.in_header_dir(rel):
            return None, False
        if parts[0] == "tools":
            return "tools", True
        if parts[0] == "src" and len(parts) > 2 and parts[1] in RANK and parts[1] != "tools":
            return parts[1], True
        return None, False

    def in_header_dir(self, rel):
        return any(rel.startswith(d + os.sep) for d in self.header_dirs)

    def _map_headers(self):
        defined = {}  # function name -> set of layers defining it
        for rel in self.files:
            layer, _ = self.dir_layer(rel)
            if layer and not rel.endswith(".h"):
                for name in defined_functions(self.text[rel]):
                    defined.setdefault(name, set()).add(layer)
        mapping, function_less = {}, []
        for rel in self.files:
            if not self.in_header_dir(rel):
                continue
            layers = set()
            for name in declared_functions(self.text[rel]):
                layers |= defined.get(name, set())
            table = LAYER_OF_HEADER.get(os.path.basename(rel))
            if len(layers) > 1:
                names = ", ".join(sorted(layers, key=RANK.get))
                self.problems.append((rel, 1, "declares functions defined in more than one "
                                      "layer (%s): split it by layer" % names))
                mapping[rel] = max(layers, key=RANK.get)
            elif layers:
                (mapping[rel],) = layers
                if table and table != mapping[rel]:
                    self.problems.append((rel, 1, "LAYER_OF_HEADER says %s, its functions are "
                                          "defined in %s" % (table, mapping[rel])))
            elif table:
                mapping[rel] = table
            else:
                function_less.append(rel)
        # Function-less headers: the highest layer they include, settled include by include.
        for rel in function_less:
            mapping[rel] = "core"
        changed = True
        while changed:
            changed = False
            for rel in function_less:
                for _, quote, name in includes(self.text[rel]):
                    target = self.resolve(rel, quote, name)
                    to = mapping.get(target) or self.dir_layer(target or "")[0]
                    if to and RANK[to] > RANK[mapping[rel]]:
                        mapping[rel], changed = to, True
        return mapping

    def layer_of(self, rel):
        """(layer, private) of a project file; layer None when it has none."""
        layer, private = self.dir_layer(rel)
        if layer:
            return layer, private
        return self.header_layer.get(rel), False

    def resolve(self, including, quote, name):
        """The project file an #include names (relative path), or None."""
        candidates = []
        if quote == '"':
            candidates.append(os.path.join(os.path.dirname(including), name))
        candidates += [os.path.join(d, name) for d in self.header_dirs]
        if including.startswith("tools" + os.sep):
            candidates.append(os.path.join("tools", name))  # "common/cli.h", "run/run.h"
        candidates.append(os.path.join("src", name))  # "ramforge/core/report_json.h"
        for c in candidates:
            c = os.path.normpath(c)
            if c in self.text:
                return c
        return None


def check(root, show_map=False):
    tree = Tree(root)
    if show_map:
        for rel in sorted(tree.header_layer):
            print("%s: %s" % (rel, tree.header_layer[rel]))
    violations = list(tree.problems)
    # Internal headers live in their layer's folder: src/include/ramforge/<layer>/x.h.
    for rel in sorted(tree.header_layer):
        parts = rel.split(os.sep)
        if parts[0] != "src" or "ramforge" not in parts:
            continue  # the installed headers (include/ramforge/) are one flat folder
        where = parts[parts.index("ramforge") + 1:-1]
        layer = tree.header_layer[rel]
        if not where:
            violations.append((rel, 1, "an internal header outside a layer's folder: move it "
                               "to ramforge/%s/" % layer))
        elif where != [layer]:
            violations.append((rel, 1, "a %s header in ramforge/%s/: internal headers live in "
                               "their layer's folder (ramforge/%s/)" % (layer, "/".join(where),
                                                                       layer)))
    for rel in tree.files:
        if not tree.in_header_dir(rel) and tree.dir_layer(rel)[0] is None:
            violations.append((rel, 1, "in no layer: not under src/{%s}/, tools/ or an include dir"
                               % ",".join(LAYERS[:5])))
            continue
        layer, _ = tree.layer_of(rel)
        if layer is None:
            continue  # reported by the mapping
        for lineno, quote, name in includes(tree.text[rel]):
            shown = '%s%s%s' % (quote, name, '"' if quote == '"' else ">")
            target = tree.resolve(rel, quote, name)
            if target is None and llama_header(name):
                if (layer != "forge" and rel not in LLAMA_INCLUDERS) or tree.in_header_dir(rel):
                    violations.append((rel, lineno, "%s includes llama.cpp's %s: only src/forge/ "
                                       "includes llama.cpp, ggml and gguf headers" % (layer, shown)))
                continue
            if target is None:
                if quote == '"' or name.startswith("ramforge/"):
                    violations.append((rel, lineno, "%s names no file of the tree (looked in the "
                                       "file's dir, %s and src/)" % (shown, ", ".join(tree.header_dirs))))
                continue
            only = ONLY_INCLUDED_BY.get(target)
            if only and rel not in only and rel != target:
                violations.append((rel, lineno, "includes %s: only %s include it" %
                                   (target, ", ".join(only))))
            to_layer, private = tree.layer_of(target)
            if to_layer is None:
                continue  # reported by the mapping
            if RANK[to_layer] > RANK[layer]:
                allowed = ", ".join(LAYERS[:RANK[layer] + 1])
                violations.append((rel, lineno, "%s includes %s of %s, a layer above it: %s includes "
                                   "only %s" % (layer, shown, to_layer, layer, allowed)))
            elif private and to_layer != layer:
                violations.append((rel, lineno, "%s includes %s, a private header of %s (%s): only "
                                   "%s includes it" % (layer, shown, to_layer, target, to_layer)))
    for rel, lineno, message in violations:
        print("%s:%d: %s" % (rel, lineno, message))
    print("check_layers: %d files, %d violations" % (len(tree.files), len(violations)),
          file=sys.stderr)
    return 1 if violations else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root", help="the source tree (holding src/, tools/, include/)")
    ap.add_argument("--map", action="store_true", help="print each header's layer first")
    args = ap.parse_args()
    return check(args.root, args.map)


if __name__ == "__main__":
    sys.exit(main())
