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


# Reading a real model's header back, and laying its tensor data out again: tests whose
# subject is page sharing build a file whose sharing they know, instead of depending on how
# llama.cpp's writer happens to lay out a generated model.
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
           10: "<Q", 11: "<q", 12: "<d"}
_ARRAY, ALIGN_KEY = 9, "general.alignment"
# Bytes of n elements of a tensor type: F32, F16, Q4_0 (32 per 18-byte block), Q8_0 (32 per 34).
_TYPE_BYTES = {F32: lambda n: 4 * n, 1: lambda n: 2 * n, 2: lambda n: n // 32 * 18,
               Q8_0: lambda n: n // 32 * 34}


def _skip_value(buf, pos, vtype):
    if vtype == GGUF_STRING:
        (n,) = struct.unpack_from("<Q", buf, pos)
        return pos + 8 + n
    if vtype == _ARRAY:
        etype, n = struct.unpack_from("<IQ", buf, pos)
        pos += 12
        for _ in range(n):
            pos = _skip_value(buf, pos, etype)
        return pos
    return pos + struct.calcsize(_SCALAR[vtype])


def read_layout(path):
    """The header of a GGUF v3 file: a dict with kv_bytes (the key/value section as it
    is), n_kv, alignment, data_offset and tensors, a list of dicts (name, ne, type,
    offset relative to the data section, nbytes)."""
    with open(path, "rb") as f:
        buf = f.read()
    magic, version, n_tensors, n_kv = struct.unpack_from("<4sIQQ", buf, 0)
    if magic != b"GGUF" or version != 3:
        raise ValueError(f"{path}: not a GGUF v3 file")
    pos = kv_start = 24
    alignment = 32
    for _ in range(n_kv):
        (klen,) = struct.unpack_from("<Q", buf, pos)
        key = buf[pos + 8:pos + 8 + klen].decode()
        pos += 8 + klen
        (vtype,) = struct.unpack_from("<I", buf, pos)
        pos += 4
        if key == ALIGN_KEY:
            (alignment,) = struct.unpack_from("<I", buf, pos)
        pos = _skip_value(buf, pos, vtype)
    kv_bytes = buf[kv_start:pos]
    tensors = []
    for _ in range(n_tensors):
        (nlen,) = struct.unpack_from("<Q", buf, pos)
        name = buf[pos + 8:pos + 8 + nlen].decode()
        pos += 8 + nlen
        (ndim,) = struct.unpack_from("<I", buf, pos)
        ne = list(struct.unpack_from(f"<{ndim}q", buf, pos + 4))
        pos += 4 + 8 * ndim
        ttype, offset = struct.unpack_from("<IQ", buf, pos)
        pos += 12
        n = 1
        for d in ne:
            n *= d
        tensors.append({"name": name, "ne": ne, "type": ttype, "offset": offset,
                        "nbytes": _TYPE_BYTES[ttype](n)})
    data_offset = pos + (alignment - pos % alignment) % alignment
    return {"kv_bytes": kv_bytes, "n_kv": n_kv, "alignment": alignment,
            "data_offset": data_offset, "tensors": tensors, "buf": buf}


def relayout(src, dst, first, page=4096):
    """Writes dst: src's model with the same key/values (plus one padding string that
    puts the data section on a page) and tensor bytes, the tensors for which first(name)
    is true first, in their order, then the others. Offsets follow one another at the
    file's alignment, as ggml requires. Returns {name: (absolute first byte, nbytes)}
    of the new layout."""
    lay = read_layout(src)
    buf, align = lay["buf"], lay["alignment"]
    order = ([t for t in lay["tensors"] if first(t["name"])] +
             [t for t in lay["tensors"] if not first(t["name"])])
    offsets, off = {}, 0
    for t in order:
        off += (align - off % align) % align
        offsets[t["name"]] = off
        off += t["nbytes"]
    infos = b""
    for t in order:
        infos += _string(t["name"]) + struct.pack("<I", len(t["ne"]))
        infos += b"".join(struct.pack("<q", d) for d in t["ne"])
        infos += struct.pack("<IQ", t["type"], offsets[t["name"]])
    key = "ramforge.test.padding"
    fixed = 24 + len(lay["kv_bytes"]) + len(_string(key)) + 4 + 8 + len(infos)
    pad_kv = _string(key) + struct.pack("<I", GGUF_STRING) + _string(b"-" * ((-fixed) % page))
    head = (b"GGUF" + struct.pack("<IQQ", 3, len(order), lay["n_kv"] + 1) + lay["kv_bytes"] +
            pad_kv + infos)
    assert len(head) % page == 0   # page is a multiple of the alignment: no padding after
    data = bytearray(off + (align - off % align) % align)
    for t in order:
        start = lay["data_offset"] + t["offset"]
        o = offsets[t["name"]]
        data[o:o + t["nbytes"]] = buf[start:start + t["nbytes"]]
    with open(dst, "wb") as f:
        f.write(head + bytes(data))
    return {t["name"]: (len(head) + offsets[t["name"]], t["nbytes"]) for t in order}


def shared_page_tensors(extents, page=4096):
    """The names of the tensors that share a page with another one, from their
    absolute (first byte, nbytes) extents."""
    owners = {}
    for name, (first, n) in extents.items():
        for p in range(first // page, (first + n - 1) // page + 1):
            owners.setdefault(p, set()).add(name)
    return {name for names in owners.values() if len(names) > 1 for name in names}
