#!/usr/bin/env python3
"""Hostile GGUF headers (issue 13, fault 1): sizes that overflow, impossible shapes and types.

Each file is written field by field (gguf_writer.py), so every case is a header no real writer
produces. `inspect --page-cache --json`, `run` and `serve` must each reject it before llama.cpp
loads anything: a non-zero exit and one "ramforge: " line naming the tensor (or the header
field) and the reason. A well-formed file from the same writer passes with the byte size worked
out by hand, so the check is not rejecting everything."""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_util import check, expect_error_lines, run_main, run_ramforge  # noqa: E402
from gguf_writer import F32, GGUF_U32, Q8_0, gguf_bytes  # noqa: E402

U32_ALIGN = "general.alignment"

# name -> (tensors, kv, the words the error line must contain)
HOSTILE = {
    # 2^62 * 4 elements: the element count wraps to 0 in 64 bits (the reported file).
    "count_overflow": ([("big.weight", [2**62, 4], F32, 0)], (),
                       ["'big.weight'", "element count overflows"]),
    # 2^61 elements of 8 bytes (f64, type 28): 2^64 bytes wrap to 0.
    "bytes_overflow": ([("wide.weight", [2**61], 28, 0)], (),
                       ["'wide.weight'", "byte size overflows"]),
    # 31 * 2^53 rows of one q8_0 block: the element count fits in int64, the row size
    # (34 bytes) times the rows does not.
    "rows_overflow": ([("q.weight", [32, 31 * 2**53], Q8_0, 0)], (),
                      ["'q.weight'", "byte size overflows"]),
    # an offset 32 bytes below 2^64: offset + 64 bytes wraps.
    "offset_overflow": ([("off.weight", [16], F32, 2**64 - 32)], (),
                        ["'off.weight'", "offset + size overflows"]),
    # offset + size fits, the data offset added to it does not.
    "data_offset_overflow": ([("far.weight", [8], F32, 2**64 - 64)], (),
                             ["'far.weight'", "past the end of the file"]),
    "negative_dim": ([("neg.weight", [-4, 4], F32, 0)], (),
                     ["'neg.weight'", "dimension 0 of -4 elements"]),
    "zero_dim": ([("zero.weight", [4, 0], F32, 0)], (),
                 ["'zero.weight'", "dimension 1 of 0 elements"]),
    "five_dims": ([("five.weight", [1, 1, 1, 1, 1], F32, 0)], (),
                  ["'five.weight'", "5 dimensions"]),
    "removed_type": ([("old.weight", [32], 4, 0)], (), ["'old.weight'", "unknown type 4"]),
    "unknown_type": ([("new.weight", [32], 250, 0)], (), ["'new.weight'", "unknown type 250"]),
    "partial_block": ([("blk.weight", [33, 2], Q8_0, 0)], (),
                      ["'blk.weight'", "not a multiple of the block size 32"]),
    # padding to a 2 GiB alignment puts the data section past the end of the file.
    "alignment_padding": ([("pad.weight", [8], F32, 0)],
                          ((U32_ALIGN, GGUF_U32, struct.pack("<I", 2**31)),),
                          ["'pad.weight'", "past the end of the file"]),
    "alignment_not_pow2": ([("a.weight", [8], F32, 0)],
                           ((U32_ALIGN, GGUF_U32, struct.pack("<I", 24)),),
                           ["general.alignment 24 is not a power of two"]),
    # a name with a newline and an escape sequence: shown with '?' in their place
    "control_name": ([("evil\n\x1b[2Jname", [4, 0], F32, 0)], (),
                     ["'evil??[2Jname'", "dimension 1 of 0 elements"]),
    # an array of 2^61 u64 values: its byte size wraps.
    "array_overflow": ([("x.weight", [8], F32, 0)],
                       (("tokenizer.scores", 9, struct.pack("<IQ", 10, 2**61)),),
                       ["'tokenizer.scores'", "overflows"]),
}


class Ctx:
    def __init__(self, args, tmp):
        self.rf = args.ramforge
        self.tmp = tmp

    def run(self, *argv, check_rc=0, **kw):
        return run_ramforge(self.rf, argv, check_rc, **kw)

    def write(self, name, data):
        path = os.path.join(self.tmp, name + ".gguf")
        with open(path, "wb") as f:
            f.write(data)
        return path


def expect_rejected(c, path, words):
    """inspect, run and serve: exit 1, one error line with every word, nothing on stdout."""
    for argv in (["inspect", "--page-cache", "--json", path],
                 ["run", "-m", path, "-p", "hi", "-n", "1"],
                 ["serve", "-m", path, "--port", "0"]):
        p = expect_error_lines(c, argv, 1, words[0])
        line = [ln for ln in p.stderr.splitlines() if ln.startswith("ramforge: ")][0]
        for w in words:
            check(w in line, f"{argv[0]} {os.path.basename(path)}: {line!r} lacks {w!r}")
        check("llama" not in p.stderr, f"{argv[0]}: llama.cpp saw the file: {p.stderr!r}")
        check(p.stdout == "", f"{argv[0]}: output on a rejected file: {p.stdout!r}")


def case_gguf_sizes(c):
    # The control: 8 x 2 f32 = 64 bytes at offset 0 of the data section passes the check.
    ok = c.write("ok", gguf_bytes([("ok.weight", [8, 2], F32, 0)]))
    rep = json.loads(c.run("inspect", "--page-cache", "--json", ok).stdout)
    tensors = {t["name"]: t for t in rep["tensors"]}
    check(tensors["ok.weight"]["logical_bytes"] == 8 * 2 * 4, f"control: {tensors}")
    for name, (tensors, kv, words) in HOSTILE.items():
        expect_rejected(c, c.write(name, gguf_bytes(tensors, kv)), words)
    # Counts no file of this size can hold are refused before any loop runs over them.
    huge = bytearray(gguf_bytes([("t.weight", [8], F32, 0)]))
    huge[8:16] = struct.pack("<Q", 2**62)
    expect_rejected(c, c.write("huge_count", bytes(huge)), ["tensors cannot fit in"])


CASES = {"gguf_sizes": case_gguf_sizes}

if __name__ == "__main__":
    run_main(CASES, Ctx, "ramforge-e2e-gguf-")
