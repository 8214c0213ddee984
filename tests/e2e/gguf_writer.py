"""A minimal GGUF writer for hostile-header tests and fuzz seeds: every field is written as
given, so shapes, types and offsets that no real writer would produce can be expressed."""
import struct

GGUF_U32, GGUF_STRING = 4, 8
F32, Q8_0 = 0, 8


def _string(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def gguf_bytes(tensors, kv=(), version=3, alignment=32, data_bytes=None):
    """tensors: (name, ne list, type id, offset) tuples; kv: (key, gguf type, packed value)
    tuples. The data section holds data_bytes zero bytes (default: 64)."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kv))
    for key, vtype, value in kv:
        out += _string(key) + struct.pack("<I", vtype) + value
    for name, ne, ttype, offset in tensors:
        out += _string(name) + struct.pack("<I", len(ne))
        out += b"".join(struct.pack("<q", d) for d in ne)
        out += struct.pack("<IQ", ttype, offset)
    out += b"\0" * ((alignment - len(out) % alignment) % alignment)
    return out + b"\0" * (64 if data_bytes is None else data_bytes)
