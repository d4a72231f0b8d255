"""word2vec-binary conversion at real sizes, with files written by gensim itself.

Files of tens of MiB take many refills of the converter's read buffer, so rows straddle buffer
boundaries everywhere: inside keys, on the separator and inside vectors. Keys vary in length and
include non-ASCII text. Every input path (plain file, gzip, stdin) and thread count must give the
same table, equal to what gensim reads back.
"""
import gzip
import os
import struct
import subprocess

import numpy as np
import pytest

from conftest import run
from spec_reader import read_table

gensim_models = pytest.importorskip("gensim.models")

ROWS, DIM = 80_000, 128  # about 42 MiB of binary rows


def _keys(rows):
    words = ["x", "naïve", "日本語", "emoji🙂", "Straße", "a" * 37, "κόσμος", "q"]
    return [f"{words[i % len(words)]}{'_' * (i % 13)}{i}" for i in range(rows)]


@pytest.fixture(scope="module")
def gensim_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("w2v")
    rng = np.random.default_rng(12)
    vectors = rng.standard_normal((ROWS, DIM), dtype=np.float32)
    kv = gensim_models.KeyedVectors(vector_size=DIM)
    kv.add_vectors(_keys(ROWS), vectors)
    path = d / "vectors.bin"
    kv.save_word2vec_format(str(path), binary=True)
    with open(path, "rb") as f, gzip.open(d / "vectors.bin.gz", "wb", compresslevel=1) as g:
        g.write(f.read())
    return path, d / "vectors.bin.gz"


def _check(table, keys, vectors):
    m, got_keys, _ = read_table(table)
    assert got_keys == keys
    assert m.shape == vectors.shape
    assert np.array_equal(m.view(np.uint32), vectors.view(np.uint32))


def test_gensim_binary_round_trips_through_every_input_path(embstore_bin, gensim_file, tmp_path):
    plain, gz = gensim_file
    assert os.path.getsize(plain) > 40 << 20
    ref = gensim_models.KeyedVectors.load_word2vec_format(str(plain), binary=True)
    keys, vectors = list(ref.index_to_key), ref.vectors
    assert keys == _keys(ROWS)
    for name, src, stdin in [("plain", plain, None), ("gzip", gz, None),
                             ("stdin", "-", plain.read_bytes()),
                             ("gzip-stdin", "-", gz.read_bytes())]:
        for threads in ("1", "2"):
            out = tmp_path / f"{name}-{threads}.emb"
            r = subprocess.run([str(embstore_bin), "convert", str(src), str(out), "--threads",
                                threads], input=stdin, capture_output=True)
            assert r.returncode == 0, f"{name}, {threads} threads: {r.stderr.decode()}"
            assert b"word2vec-binary" in r.stdout + r.stderr
            _check(out, keys, vectors)
            out.unlink()


def test_export_gives_back_gensim_keys_and_values(embstore_bin, gensim_file, tmp_path):
    plain, _ = gensim_file
    table = tmp_path / "v.emb"
    assert run([embstore_bin, "convert", plain, table]).returncode == 0
    r = run([embstore_bin, "export", table, tmp_path / "v.npy", "--keys", tmp_path / "v.keys"])
    assert r.returncode == 0, r.stderr
    ref = gensim_models.KeyedVectors.load_word2vec_format(str(plain), binary=True)
    assert (tmp_path / "v.keys").read_text(encoding="utf-8").split("\n")[:-1] == ref.index_to_key
    assert np.array_equal(np.load(tmp_path / "v.npy"), ref.vectors)


def test_original_word2vec_layout_with_a_line_break_after_each_vector(embstore_bin, tmp_path):
    # The layout of the original word2vec tool (and of the report that found the bug): token,
    # space, the float32 bytes, "\n". 10,000 rows of 128 values are ~5 MiB.
    rows, dim = 10_000, 128
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((rows, dim), dtype=np.float32)
    path = tmp_path / "w.bin"
    with open(path, "wb") as f:
        f.write(b"%d %d\n" % (rows, dim))
        for i in range(rows):
            f.write(b"w%07d " % i + vectors[i].tobytes() + b"\n")
    for policy in ("error", "first"):
        out = tmp_path / f"{policy}.emb"
        r = run([embstore_bin, "convert", path, out, "--on-duplicate-key", policy])
        assert r.returncode == 0, r.stderr
        _check(out, [f"w{i:07d}" for i in range(rows)], vectors)


def test_binary_duplicate_key_names_row_and_byte(embstore_bin, tmp_path):
    rec = [b"a " + struct.pack("<2f", 1, 2), b"b " + struct.pack("<2f", 3, 4),
           b"a " + struct.pack("<2f", 5, 6)]
    path = tmp_path / "d.bin"
    path.write_bytes(b"3 2\n" + b"".join(rec))
    r = run([embstore_bin, "convert", path, tmp_path / "d.emb"])
    assert r.returncode == 1
    assert f"{path}: word2vec-binary row 3 (byte 24): duplicate key 'a' (first at row 1" in r.stderr
    assert "use --on-duplicate-key first or last)" in r.stderr
    assert not (tmp_path / "d.emb").exists()
