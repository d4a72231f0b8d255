"""Key lookups never return a row from a block that fails its checksum, and keys carry checksums
of their own (format version 2): from a file, through a server, from Python and the CLI."""
import json
import struct

import numpy as np
import pytest

import embstore
from conftest import DATA, expected_matrix, flip_bits, run, wait_for_table, write_table

ROWS, DIM, BLOCK = 1000, 16, 64


def _layout(path):
    buf = open(path, "rb").read(1 << 16)
    (n,) = struct.unpack_from("<Q", buf, 0)
    header = json.loads(buf[8:8 + n])
    return 8 + n, header


def _flip(path, offset):
    flip_bits(path, offset, 0x04)


def _flip_row(path, row):
    base, _ = _layout(path)
    _flip(path, base + row * DIM * 4 + 7)


def _flip_key_byte(path, row):
    base, h = _layout(path)
    offsets = h["keys.offsets"]["data_offsets"][0]
    with open(path, "rb") as f:
        f.seek(base + offsets + 8 * row)
        (key_begin,) = struct.unpack("<Q", f.read(8))
    _flip(path, base + h["keys.bytes"]["data_offsets"][0] + key_begin)


@pytest.fixture
def corrupt_row(make_table_bin, server):
    """A served keyed table whose row 140 (block 2, rows [128, 192)) has one flipped bit."""
    path = write_table(make_table_bin, server.store / "words.emb", ROWS, DIM, keys=True,
                       block_rows=BLOCK)
    _flip_row(path, 140)
    wait_for_table(server.unix, "words")
    return server, path


def _sources(srv, path):
    return [((str(path),), {}), ((str(srv.store), "words"), {}), ((srv.unix, "words"), {}),
            ((srv.tcp, "words"), {"local": False})]


def test_lookup_of_a_key_in_a_corrupt_block_fails_from_every_source(corrupt_row):
    srv, path = corrupt_row
    want = expected_matrix(ROWS, DIM)
    for args, kw in _sources(srv, path):
        got = embstore.load(*args, keys=["k7", "k999", "k300"], **kw)
        np.testing.assert_array_equal(got, want[[7, 999, 300]])
        for key in ("k140", "k128", "k191"):
            with pytest.raises(embstore.errors.CorruptionError, match="block 2"):
                embstore.load(*args, keys=["k7", key], **kw)


def test_unverified_local_lookup_is_the_callers_choice(corrupt_row):
    _, path = corrupt_row
    got = embstore.load(str(path), keys=["k140"], verify=False)
    assert not np.array_equal(got[0], expected_matrix(ROWS, DIM)[140])


def test_flipped_key_byte_fails_verify_lookups_and_pull(embstore_bin, make_table_bin, server,
                                                        tmp_path):
    path = write_table(make_table_bin, server.store / "words.emb", ROWS, DIM, keys=True,
                       block_rows=BLOCK)
    _flip_key_byte(path, 500)
    wait_for_table(server.unix, "words")
    r = run([embstore_bin, "verify", path])
    assert r.returncode == 1
    assert "checksum mismatch in keys.bytes" in r.stderr and "and so are the keys" in r.stderr
    for args, kw in _sources(server, path):
        with pytest.raises(embstore.errors.CorruptionError, match="keys"):
            embstore.load(*args, keys=["k1"], **kw)
    with pytest.raises(embstore.errors.CorruptionError, match="keys"):
        embstore.Source.resolve(str(path)).keys(None, 0, 5)
    r = run([embstore_bin, "pull", "--from", server.unix, "--table", "words", "--out",
             tmp_path / "copy.emb"])
    assert r.returncode == 1 and "keys" in r.stderr, r.stderr
    assert not list(tmp_path.glob("*copy*"))


def test_version_1_keys_read_but_verify_says_they_are_unchecked(embstore_bin):
    r = run([embstore_bin, "verify", DATA / "golden_v1_f32_keys.emb"])
    assert r.returncode == 0, r.stderr
    assert "keys unchecked (format version 1 has no key checksums)" in r.stdout
    r = run([embstore_bin, "verify", DATA / "golden_v2_f32_keys.emb"])
    assert r.returncode == 0 and "blocks and the keys verified" in r.stdout, r.stdout
    got = embstore.load(str(DATA / "golden_v1_f32_keys.emb"), keys=["k3", "k49"])
    np.testing.assert_array_equal(got, expected_matrix(50, 8)[[3, 49]])
