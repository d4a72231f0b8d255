"""Table files are safetensors files, and docs/FORMAT.md alone is enough to read them."""
import json
import struct

import ml_dtypes  # noqa: F401  (registers numpy's "bfloat16" dtype, which safetensors uses)
import numpy as np
import pytest
from safetensors.numpy import load_file
from safetensors import safe_open

from conftest import DATA, expected_matrix
from spec_reader import read_table

CASES = [
    # rows, dim, dtype, keys
    (100, 16, "f32", True),
    (77, 5, "f16", False),
    (64, 3, "bf16", True),
    (1, 1, "f32", False),
    (0, 8, "f32", True),
    (0, 2, "f16", False),
]


def _safetensors_matrix(path, dtype):
    tensors = load_file(str(path))
    m = tensors["embedding"]
    assert m.dtype == {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}[dtype]
    return m.astype(np.float32), tensors


@pytest.mark.parametrize("rows,dim,dtype,keys", CASES)
def test_safetensors_library_reads_our_files(make_table, rows, dim, dtype, keys):
    path = make_table(rows, dim, dtype=dtype, keys=keys, block_rows=7)
    matrix, tensors = _safetensors_matrix(path, dtype)
    assert matrix.shape == (rows, dim)
    np.testing.assert_array_equal(matrix, expected_matrix(rows, dim))
    assert tensors["checksums"].shape == ((rows + 6) // 7,)
    assert ("keys.offsets" in tensors) == keys
    assert ("keys.checksums" in tensors) == keys and (not keys or tensors["keys.checksums"].shape
                                                      == (3,))
    with safe_open(str(path), framework="numpy") as f:
        meta = f.metadata()
        assert meta["embstore.format"] == "embstore-table"
        # The lowest version that holds the table: 2 adds key checksums.
        assert meta["embstore.version"] == ("2" if keys else "1")
        assert meta["embstore.block_rows"] == "7"
        assert meta["generator"] == "embstore_make_test_table"


@pytest.mark.parametrize("rows,dim,dtype,keys", CASES)
def test_spec_only_reader_reads_our_files(make_table, rows, dim, dtype, keys):
    path = make_table(rows, dim, dtype=dtype, keys=keys)
    matrix, got_keys, meta = read_table(path)
    np.testing.assert_array_equal(matrix.astype(np.float32), expected_matrix(rows, dim))
    if keys:
        assert got_keys == [f"k{r}" for r in range(rows)]
    else:
        assert got_keys is None
    assert meta["embstore.checksum"] == "xxh3-64"


def test_matrix_starts_on_a_page_and_header_is_space_padded(make_table):
    path = make_table(10, 4, keys=True)
    buf = path.read_bytes()
    (n,) = struct.unpack_from("<Q", buf, 0)
    assert (8 + n) % 4096 == 0
    text = buf[8:8 + n].decode()
    assert text.rstrip(" ") == text.rstrip()  # only spaces pad the JSON
    header = json.loads(text)
    assert list(header)[:2] == ["__metadata__", "embedding"]
    assert header["embedding"]["data_offsets"][0] == 0


@pytest.mark.parametrize("name,dtype,rows,dim,prefix", [
    ("golden_v1_f32_keys.emb", "f32", 50, 8, "k"),
    ("golden_v1_f16_unicode.emb", "f16", 33, 3, "ключ"),
    ("golden_v1_bf16.emb", "bf16", 20, 5, None),
    ("golden_v1_empty.emb", "f32", 0, 4, "k"),
    ("golden_v2_f32_keys.emb", "f32", 50, 8, "k"),
    ("golden_v2_f16_unicode.emb", "f16", 33, 3, "ключ"),
    ("golden_v2_empty.emb", "f32", 0, 4, "k"),
    ("golden_v3_f32_keys.emb", "f32", 50, 8, "k"),
    ("golden_v3_bf16.emb", "bf16", 20, 5, None),
    ("golden_v3_empty.emb", "f32", 0, 4, None),
])
def test_golden_files_read_with_both_readers(name, dtype, rows, dim, prefix):
    path = DATA / name
    matrix, _ = _safetensors_matrix(path, dtype)
    np.testing.assert_array_equal(matrix, expected_matrix(rows, dim))
    spec_matrix, keys, _ = read_table(path)
    np.testing.assert_array_equal(spec_matrix.astype(np.float32), expected_matrix(rows, dim))
    assert keys == (None if prefix is None else [f"{prefix}{r}" for r in range(rows)])
