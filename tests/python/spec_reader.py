"""A table reader written from docs/FORMAT.md alone, with numpy and the standard library only.

It exists to prove the spec is enough to read a table; it must not import embstore code.
"""
import json, struct
import numpy as np

def read_table(path):
    buf = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", buf, 0)
    header = json.loads(buf[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__")
    assert meta["embstore.format"] == "embstore-table" and meta["embstore.version"] in ("1", "2", "3")
    base = 8 + n
    assert base % 4096 == 0, "matrix must start on a 4096-byte boundary"
    def tensor(name, dtype):
        t = header[name]
        b, e = t["data_offsets"]
        return np.frombuffer(buf, dtype=dtype, count=(e - b) // np.dtype(dtype).itemsize,
                             offset=base + b).reshape(t["shape"])
    emb = header["embedding"]
    if emb["dtype"] == "BF16":  # bfloat16 is the upper half of a float32
        matrix = (tensor("embedding", "<u2").astype("<u4") << 16).view("<f4")
    else:
        matrix = tensor("embedding", {"F32": "<f4", "F16": "<f2"}[emb["dtype"]])
    # Version 3 may add row_hashes: one XXH3-64 a row, right after the checksums.
    if "row_hashes" in header:
        assert meta["embstore.version"] == "3"
        assert header["row_hashes"]["dtype"] == "U64"
        assert header["row_hashes"]["shape"] == [matrix.shape[0]]
    keys = None
    if "keys.offsets" in header:
        # Version 2 adds keys.checksums: three XXH3-64 values, one per key tensor.
        assert ("keys.checksums" in header) == (meta["embstore.version"] in ("2", "3"))
        if "keys.checksums" in header:
            assert header["keys.checksums"]["shape"] == [3]
        offsets, data = tensor("keys.offsets", "<u8"), tensor("keys.bytes", "u1").tobytes()
        keys = [data[offsets[i]:offsets[i + 1]].decode("utf-8") for i in range(len(offsets) - 1)]
    return matrix, keys, meta
