#!/usr/bin/env python3
"""Writes the seed inputs of tests/fuzz/corpus/<harness>/ (seed-* files; crash and regression
inputs added by hand keep other names and are left alone). Run from anywhere:

    python3 tests/fuzz/make_seeds.py

Sources: the fixture files of tests/data/sys (status, maps, smaps, whole cgroup trees in the
"@@ path" form of fuzz_sysroot.h), GGUF headers from tests/e2e/gguf_writer.py (well-formed
ones and the hostile cases of tests/e2e/test_gguf_hostile.py), sizes and serve request bodies
from the CLI's and the server's tests, access profiles derived from the real ones of
corpus/profile/real-*.json (written by `ramforge run --observe-dispatch --profile`, one and two
operations). Every seed is below 64 KiB."""
import copy
import glob
import json
import os
import re
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SYS = os.path.join(ROOT, "tests", "data", "sys")
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
from gguf_writer import F32, GGUF_STRING, GGUF_U32, Q8_0, gguf_bytes  # noqa: E402
import test_gguf_hostile  # noqa: E402

MAX_SEED = 64 << 10


def write(harness, name, data):
    d = os.path.join(HERE, "corpus", harness)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    assert len(data) < MAX_SEED, (harness, name, len(data))
    with open(os.path.join(d, "seed-" + re.sub(r"[^A-Za-z0-9_.-]", "_", name)), "wb") as f:
        f.write(data)


def clear_seeds():
    for p in glob.glob(os.path.join(HERE, "corpus", "*", "seed-*")):
        os.unlink(p)


def proc_files(name):
    for p in sorted(glob.glob(os.path.join(SYS, "*", "proc", "*", name))):
        yield os.path.relpath(p, SYS), open(p, "rb").read()


def tree(fixture, pid):
    """The fixture as one "@@ path" text, proc/PID/ renamed proc/self/, other pids left out."""
    out = b""
    base = os.path.join(SYS, fixture)
    for dirpath, dirnames, filenames in sorted(os.walk(base)):
        rel_dir = os.path.relpath(dirpath, base)
        parts = rel_dir.split(os.sep)
        if parts[0] == "proc" and len(parts) > 1:
            if parts[1] != pid:
                continue
            parts[1] = "self"
        rel_dir = "/".join(parts)
        if not filenames and not dirnames and rel_dir != ".":
            out += b"@@ " + rel_dir.encode() + b"/\n"
        for fn in sorted(filenames):
            rel = fn if rel_dir == "." else rel_dir + "/" + fn
            data = open(os.path.join(dirpath, fn), "rb").read()
            out += b"@@ " + rel.encode() + b"\n" + data
            if data and not data.endswith(b"\n"):
                out += b"\n"
    return out


def gguf_seeds():
    arch = ("general.architecture", GGUF_STRING, struct.pack("<Q", 5) + b"llama")
    blocks = ("llama.block_count", GGUF_U32, struct.pack("<I", 2))
    tokens = ("tokenizer.ggml.tokens", 9,
              struct.pack("<IQ", GGUF_STRING, 3) +
              b"".join(struct.pack("<Q", len(t)) + t for t in (b"<s>", b"</s>", b"hi")))
    scores = ("tokenizer.ggml.scores", 9, struct.pack("<IQ", 6, 3) + struct.pack("<3f", 0, 0, -1))
    align = ("general.alignment", GGUF_U32, struct.pack("<I", 64))
    yield "empty", gguf_bytes([])
    yield "one_f32", gguf_bytes([("a.weight", [8, 2], F32, 0)])
    yield "model_like", gguf_bytes(
        [("token_embd.weight", [32, 3], Q8_0, 0), ("blk.0.attn_q.weight", [32, 32], Q8_0, 128),
         ("output_norm.weight", [32], F32, 1280)],
        (arch, blocks, tokens, scores), data_bytes=1408)
    yield "aligned_64", gguf_bytes([("b.weight", [16], F32, 0), ("c.weight", [16], F32, 64)],
                                   (align,), alignment=64, data_bytes=128)
    yield "v2", gguf_bytes([("d.weight", [4], F32, 0)], version=2)
    for name, (tensors, kv, _) in test_gguf_hostile.HOSTILE.items():
        yield "hostile_" + name, gguf_bytes(tensors, kv)


SIZES = ["512MiB", "2G", "1.5 GiB", "0.1KB", "2GB", "300000000", "1", "0", "0.0001K", "1.",
         "18446744073709551615", "18446744073709551616", "16EiB", "15.999999999999999999E",
         "8EiB", "9223372036854775807", "1 B", "1.5B", "-1", " 1G", "1G ", "1 ", "3 kib", "7pb",
         "99999999999999999999x",
         # Kubernetes' rule (s24read item 7): exponents, Kubernetes' number forms, refusals
         "1e9", "2GB", "300m", ".5Gi", "1500e-3", "1E-0", "15e-1", "5.Gi", "512K", "2gi"]

BODIES = ['{"prompt":"Hello my name is","n_predict":8}',
          '{"prompt":[1,2,3],"max_tokens":4,"stream":true}',
          '{"prompt":"x","temperature":0.5,"top_k":40,"top_p":0.9,"min_p":0.05,"seed":42}',
          '{"prompt":"x","n_predict":-1,"seed":-1}',
          '{"prompt":"x","n_predict":0}', '{"prompt":"","n_predict":1}',
          '{"prompt":[300]}', '{"prompt":["a"]}', '{"prompt":"x","top_k":1e400}',
          '{"prompt":"x","seed":4294967296}', '{"prompt":"x","stream":"yes"}',
          '{"content":"hi","with_pieces":true,"add_special":false,"parse_special":true}',
          '{"content":5}', '{"tokens":[1,2,3]}', '{"tokens":[-1]}', '{"tokens":"a"}',
          '[]', '{', '', 'null', '{"prompt":"\\u00e9\\ud83d\\ude00"}']


def profile_seeds():
    """Variants of a real two-operation profile: each breaks one rule rf_profile_parse checks,
    or stays valid on an edge (history over the harness's bound of 3, compact text)."""
    base = json.load(open(os.path.join(HERE, "corpus", "profile", "real-2ops.json")))

    def variant(fn):
        d = copy.deepcopy(base)
        fn(d)
        return json.dumps(d, indent=1)

    other = "sha256:" + "0" * 64
    t0 = base["tensors"][0]
    h0 = base["history"][0]
    yield "compact", json.dumps(base, separators=(",", ":"))
    yield "version_2", variant(lambda d: d.update(format_version=2))
    yield "kind_other", variant(lambda d: d.update(kind="ramforge.other"))
    yield "identity_short", variant(lambda d: d.update(identity=base["identity"][:-1]))
    yield "identity_upper", variant(lambda d: d.update(identity=base["identity"].upper()))
    yield "size_negative", variant(lambda d: d.update(file_size_bytes=-1))
    yield "size_huge", variant(lambda d: d.update(operations=2 ** 64))
    yield "tensor_twice", variant(lambda d: d["tensors"].append(dict(t0)))
    yield "tensor_name_long", variant(lambda d: d["tensors"].append(dict(t0, name="x" * 300)))
    yield "tensor_name_empty", variant(lambda d: d["tensors"].append(dict(t0, name="")))
    yield "tensor_rank_never", variant(lambda d: d["tensors"][0].update(first_rank=None))
    yield "tensor_fields_missing", variant(lambda d: d["tensors"].append({"name": "a"}))
    yield "history_other_identity", variant(
        lambda d: d["history"].append(dict(h0, identity=other)))
    yield "history_over_bound", variant(
        lambda d: d["history"].extend(dict(h0, operation=i) for i in range(3, 12)))
    yield "history_not_object", variant(lambda d: d["history"].append(7))
    yield "no_tensors", variant(lambda d: d.update(tensors=[]))
    yield "truncated", json.dumps(base)[:len(json.dumps(base)) // 2]


def main():
    clear_seeds()
    for rel, data in proc_files("status"):
        write("status", rel, data)
    for name in ("maps", "smaps"):
        for rel, data in proc_files(name):
            write("maps", rel, data)
    for fixture in sorted(os.listdir(SYS)):
        if not fixture.startswith("cg-") or not os.path.isdir(os.path.join(SYS, fixture, "proc")):
            continue
        pids = sorted(os.listdir(os.path.join(SYS, fixture, "proc")))
        for pid in pids:
            write("cgroup", f"{fixture}-{pid}", tree(fixture, pid))
    for name, data in gguf_seeds():
        write("gguf", name, data)
    for i, s in enumerate(SIZES):
        write("size", f"{i:02d}", s)
    for i, b in enumerate(BODIES):
        write("serve_request", f"{i:02d}", b)
    for name, data in profile_seeds():
        write("profile", name, data)


if __name__ == "__main__":
    main()
