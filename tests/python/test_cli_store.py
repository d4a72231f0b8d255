"""`embstore inspect`, `verify` and `export`, including their failure modes."""
import json

import numpy as np
import pytest

from conftest import expected_matrix, run, wait_for_table, write_table


def test_help_lists_every_subcommand(embstore_bin):
    out = run([embstore_bin, "--help"])
    assert out.returncode == 0
    for cmd in ["convert", "inspect", "verify", "export", "serve", "pull", "ls"]:
        assert cmd in out.stdout


@pytest.mark.parametrize("cmd", ["inspect", "verify", "export"])
def test_each_subcommand_has_help(embstore_bin, cmd):
    out = run([embstore_bin, cmd, "--help"])
    assert out.returncode == 0
    assert "FILE" in out.stdout


def test_usage_errors_exit_2(embstore_bin):
    assert run([embstore_bin]).returncode == 2
    assert run([embstore_bin, "inspect"]).returncode == 2
    assert run([embstore_bin, "bogus"]).returncode == 2
    assert run([embstore_bin, "inspect", "x.emb", "--no-such-flag"]).returncode == 2


def test_inspect_json(embstore_bin, make_table):
    path = make_table(12, 3, dtype="bf16", keys=True, block_rows=5)
    out = run([embstore_bin, "inspect", path, "--json"])
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["rows"] == 12 and info["dim"] == 3 and info["dtype"] == "BF16"
    assert info["blocks"] == 3 and info["block_rows"] == 5
    assert info["has_keys"] and info["first_keys"] == ["k0", "k1", "k2", "k3", "k4"]
    assert info["metadata"]["generator"] == "embstore_make_test_table"
    assert info["data_offset"] % 4096 == 0


def test_inspect_text(embstore_bin, make_table):
    out = run([embstore_bin, "inspect", make_table(4, 2)])
    assert out.returncode == 0
    assert "4 x 2" in out.stdout and "F32" in out.stdout


def test_inspect_missing_file_names_it(embstore_bin, tmp_path):
    out = run([embstore_bin, "inspect", tmp_path / "nope.emb"])
    assert out.returncode == 1
    assert "nope.emb" in out.stderr


def test_inspect_rejects_a_non_table(embstore_bin, tmp_path):
    bad = tmp_path / "text.emb"
    bad.write_text("1 2 3\n4 5 6\n")
    out = run([embstore_bin, "inspect", bad])
    assert out.returncode == 1
    assert "text.emb" in out.stderr and "header" in out.stderr


def test_verify_ok(embstore_bin, make_table):
    out = run([embstore_bin, "verify", make_table(100, 4, block_rows=10)])
    assert out.returncode == 0, out.stderr
    assert "ok" in out.stdout and "10 blocks" in out.stdout


def test_verify_names_each_corrupt_block(embstore_bin, make_table):
    path = make_table(100, 4, block_rows=10)
    buf = bytearray(path.read_bytes())
    base = 8 + int.from_bytes(buf[:8], "little")
    row_bytes = 16
    for row in (3, 71):
        buf[base + row * row_bytes] ^= 0xFF
    path.write_bytes(bytes(buf))
    out = run([embstore_bin, "verify", path])
    assert out.returncode == 1
    assert "block 0 (rows [0, 10))" in out.stderr
    assert "block 7 (rows [70, 80))" in out.stderr
    assert "2 of 10 blocks are corrupt" in out.stderr


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_export_writes_npy_and_keys(embstore_bin, make_table, tmp_path, dtype):
    path = make_table(30, 6, dtype=dtype, keys=True)
    out_npy, out_keys = tmp_path / "m.npy", tmp_path / "keys.txt"
    out = run([embstore_bin, "export", path, out_npy, "--keys", out_keys])
    assert out.returncode == 0, out.stderr
    m = np.load(out_npy)
    assert m.dtype == np.float32
    np.testing.assert_array_equal(m, expected_matrix(30, 6))
    assert out_keys.read_text().splitlines() == [f"k{r}" for r in range(30)]


def test_export_native_f16(embstore_bin, make_table, tmp_path):
    path = make_table(5, 3, dtype="f16")
    out = run([embstore_bin, "export", path, tmp_path / "m.npy", "--dtype", "native"])
    assert out.returncode == 0, out.stderr
    m = np.load(tmp_path / "m.npy")
    assert m.dtype == np.float16
    np.testing.assert_array_equal(m.astype(np.float32), expected_matrix(5, 3))


def test_export_native_bf16_is_refused(embstore_bin, make_table, tmp_path):
    out = run([embstore_bin, "export", make_table(5, 3, dtype="bf16"), tmp_path / "m.npy",
               "--dtype", "native"])
    assert out.returncode == 2
    assert "BF16" in out.stderr
    assert not (tmp_path / "m.npy").exists()


def test_export_never_overwrites_without_force(embstore_bin, make_table, tmp_path):
    target = tmp_path / "m.npy"
    target.write_bytes(b"precious")
    out = run([embstore_bin, "export", make_table(5, 3), target])
    assert out.returncode == 1
    assert "already exists" in out.stderr and "m.npy" in out.stderr
    assert target.read_bytes() == b"precious"
    out = run([embstore_bin, "export", make_table(5, 3), target, "--force"])
    assert out.returncode == 0
    assert np.load(target).shape == (5, 3)


def test_export_keys_of_a_keyless_table_fails_cleanly(embstore_bin, make_table, tmp_path):
    out = run([embstore_bin, "export", make_table(5, 3), tmp_path / "m.npy",
               "--keys", tmp_path / "k.txt"])
    assert out.returncode == 1
    assert "no keys" in out.stderr
    assert list(tmp_path.glob("*.npy")) == [] and list(tmp_path.glob(".*")) == []


def test_export_refuses_keys_that_cannot_be_one_per_line(embstore_bin, tmp_path):
    # word2vec-binary keys end at a space, so a carriage return can be part of one.
    import struct
    src = tmp_path / "cr.bin"
    src.write_bytes(b"2 2\n" + b"a\rb " + struct.pack("<2f", 1, 2) + b"c " +
                    struct.pack("<2f", 3, 4))
    table = tmp_path / "cr.emb"
    assert run([embstore_bin, "convert", src, table, "--format", "word2vec-binary"]).returncode == 0
    out = run([embstore_bin, "export", table, tmp_path / "m.npy", "--keys", tmp_path / "k.txt"])
    assert out.returncode == 2, out.stderr
    assert "key of row 0 contains a line break" in out.stderr and "cr.emb" in out.stderr
    assert not (tmp_path / "k.txt").exists() and list(tmp_path.glob(".*")) == []


def test_read_commands_take_any_location(embstore_bin, make_table_bin, server, tmp_path):
    # A store directory and a server hold several tables: --table picks one, the same way for
    # inspect, verify, export and pull (client::OpenSource).
    write_table(make_table_bin, server.store / "words.emb", 300, 4, keys=True, block_rows=100)
    write_table(make_table_bin, server.store / "other.emb", 10, 2)
    wait_for_table(server.unix, "words")
    for where in (str(server.store), server.unix):
        info = json.loads(run([embstore_bin, "inspect", where, "--table", "words", "--json"]).stdout)
        assert (info["rows"], info["dim"], info["first_keys"][:2]) == (300, 4, ["k0", "k1"])
        out = run([embstore_bin, "verify", where, "--table", "words"])
        assert out.returncode == 0 and "3 blocks and the keys verified" in out.stdout, out.stderr
        dest = tmp_path / "w.npy"
        out = run([embstore_bin, "export", where, dest, "--table", "words", "--rows", "10:20",
                   "--force"])
        assert out.returncode == 0, out.stderr
        np.testing.assert_array_equal(np.load(dest), expected_matrix(300, 4)[10:20])
        missing = run([embstore_bin, "export", where, dest, "--force"])
        assert missing.returncode == 2 and "add --table NAME" in missing.stderr
    out = run([embstore_bin, "pull", "--from", str(server.store), "--table", "other", "--out",
               tmp_path / "o.emb"])
    assert out.returncode == 0, out.stderr
    absent = run([embstore_bin, "inspect", str(server.store), "--table", "nope"])
    assert absent.returncode == 1 and "no table 'nope'" in absent.stderr
