"""Hostile variants of a valid table file, for tests that feed them to every reader.

Each variant is (name, bytes). They are built from one good table: edits of its JSON header
(overflowing shapes and offsets, bad index tables, deep JSON, non-UTF-8 bytes, NUL padding, lying
versions and dtypes), a wrong header length, truncations, and single-byte flips everywhere. A
reader given any of them must either return exactly the good table's values or fail with an
embstore error naming the file; never crash, never return other values."""
import json
import random
import struct


def _split(good):
    (n,) = struct.unpack_from("<Q", good, 0)
    return n, json.loads(good[8:8 + n]), good[8 + n:]


def _with_header(good, n, text):
    raw = text if isinstance(text, bytes) else text.encode("utf-8")
    if len(raw) > n:
        return None
    return good[:8] + raw.ljust(n, b" ") + good[8 + n:]


def variants(good, seed=7, flips=120):
    n, header, data = _split(good)
    out = []

    def edit(name, fn):
        h = json.loads(json.dumps(header))
        fn(h)
        b = _with_header(good, n, json.dumps(h))
        if b is not None:
            out.append((name, b))

    big = [2 ** 62, 2 ** 63, 2 ** 64 - 1, 2 ** 40, 2 ** 32, 2 ** 24 + 1, -1, 1.5, "7", None]
    for i, v in enumerate(big):
        edit(f"rows-{i}", lambda h, v=v: h["embedding"].__setitem__("shape", [v, h["embedding"]["shape"][1]]))
        edit(f"dim-{i}", lambda h, v=v: h["embedding"].__setitem__("shape", [0, v]))
        edit(f"dim2-{i}", lambda h, v=v: h["embedding"].__setitem__("shape", [h["embedding"]["shape"][0], v]))
        edit(f"off-{i}", lambda h, v=v: h["checksums"].__setitem__("data_offsets", [v, v]))
        edit(f"koff-{i}", lambda h, v=v: h["keys.index"].__setitem__("data_offsets", [0, v]))
        edit(f"slots-{i}", lambda h, v=v: h["keys.index"].__setitem__("shape", [v]))
        edit(f"br-{i}", lambda h, v=v: h["__metadata__"].__setitem__("embstore.block_rows", str(v)))
    for i, v in enumerate(["0", "3", "", "1", "99999999999999999999", "-2"]):
        edit(f"version-{i}", lambda h, v=v: h["__metadata__"].__setitem__("embstore.version", v))
    for i, v in enumerate(["F64", "U8", "", "f32", "BF16", "F16"]):
        edit(f"dtype-{i}", lambda h, v=v: h["embedding"].__setitem__("dtype", v))
    edit("shape-3d", lambda h: h["embedding"].__setitem__("shape", [1, 2, 3]))
    edit("shape-empty", lambda h: h["embedding"].__setitem__("shape", []))
    edit("no-embedding", lambda h: h.pop("embedding"))
    edit("no-checksums", lambda h: h.pop("checksums"))
    edit("no-keysums", lambda h: h.pop("keys.checksums", None))
    edit("extra", lambda h: h.__setitem__("extra", h["checksums"]))
    edit("meta-list", lambda h: h.__setitem__("__metadata__", [1, 2]))
    edit("meta-int", lambda h: h["__metadata__"].__setitem__("x", 5))
    edit("not-object", lambda h: h.__setitem__("embedding", 5))
    for name, text in [
        ("deep", "{" + '"a":' + "[" * 5000 + "]" * 5000 + "}"),
        ("array", "[1,2,3]"),
        ("string", '"x"'),
        ("garbage", "{not json"),
        ("dupkeys", json.dumps(header)[:-1] + ', "embedding": 1}'),
    ]:
        b = _with_header(good, n, text)
        if b is not None:
            out.append((name, b))
    text = json.dumps(header).encode()
    out.append(("nonutf8", _with_header(good, n, text.replace(b"embstore-table", b"\xff\xfeembstore-table"[:14]))))
    out.append(("nul-pad", good[:8] + text + b"\0" * (n - len(text)) + good[8 + n:]))
    out.append(("tab-pad", good[:8] + text + b"\t" * (n - len(text)) + good[8 + n:]))
    out.append(("nul-inside", _with_header(good, n, text[:20] + b"\0" + text[20:])))
    for i, hl in enumerate([0, 1, 7, n - 1, n + 1, len(good), 2 ** 63, 2 ** 64 - 1]):
        out.append((f"hlen-{i}", struct.pack("<Q", hl) + good[8:]))
    for i, cut in enumerate([0, 7, 8, 100, 8 + n - 1, 8 + n, 8 + n + 1, len(good) // 2,
                             len(good) - 25, len(good) - 1]):
        out.append((f"trunc-{i}", good[:cut]))
    out.append(("padded", good + b"\0" * 4096))
    rng = random.Random(seed)
    for i in range(flips):
        pos = rng.randrange(len(good)) if i % 2 else rng.randrange(8 + n, len(good))
        b = bytearray(good)
        b[pos] ^= 1 << rng.randrange(8)
        out.append((f"flip-{i}-at-{pos}", bytes(b)))
    return [(name, b) for name, b in out if b is not None]
