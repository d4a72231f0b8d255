"""Bad or unusual arguments to embstore.load and embstore.torch get one clear embstore error,
the same whatever the source (file, store directory, server streamed or read locally)."""
import numpy as np
import pytest

import embstore
from conftest import expected_matrix, wait_for_table, write_table


@pytest.fixture
def srv(make_table_bin, server):
    write_table(make_table_bin, server.store / "kw.emb", 300, 8, keys=True, block_rows=32)
    write_table(make_table_bin, server.store / "nokeys.emb", 200, 4, block_rows=32)
    write_table(make_table_bin, server.store / "half.emb", 50, 6, dtype="f16")
    for name in ("kw", "nokeys", "half"):
        wait_for_table(server.unix, name)
    return server


def _every_source(srv, name):
    """(args, kwargs) of a load of table `name` from each kind of source."""
    return [((str(srv.store / f"{name}.emb"),), {}),
            ((str(srv.store), name), {}),
            ((srv.unix, name), {"local": True}),
            ((srv.tcp, name), {"local": False})]


def test_non_string_keys_are_an_invalid_argument(srv):
    for args, kw in _every_source(srv, "kw"):
        with pytest.raises(embstore.errors.InvalidArgumentError, match=r"keys\[0\] is int 5"):
            embstore.load(*args, keys=[5, 7], **kw)
        with pytest.raises(embstore.errors.InvalidArgumentError, match="list of strings"):
            embstore.load(*args, keys="k1", **kw)


def test_keys_on_a_keyless_table_is_the_same_error_everywhere(srv):
    for args, kw in _every_source(srv, "nokeys"):
        with pytest.raises(embstore.errors.InvalidArgumentError,
                           match="table 'nokeys' has no keys"):
            embstore.load(*args, keys=["k1"], **kw)
        src = embstore.Source.resolve(args[0])
        with pytest.raises(embstore.errors.InvalidArgumentError, match="has no keys"):
            src.keys(args[1] if len(args) > 1 else None, 0, 2)


@pytest.mark.parametrize("spelling", ["f32", "F32", "float32", np.float32, np.dtype("float32")])
def test_cli_and_numpy_spellings_of_float32(srv, spelling):
    for args, kw in _every_source(srv, "half"):
        m = embstore.load(*args, dtype=spelling, **kw)
        assert m.dtype == np.float32
        np.testing.assert_array_equal(m, expected_matrix(50, 6))


def test_unknown_dtype_names_the_choices(srv):
    with pytest.raises(embstore.errors.InvalidArgumentError, match="'float32'.*'bf16'.*'native'"):
        embstore.load(str(srv.store / "kw.emb"), dtype="f64")
    with pytest.raises(embstore.errors.InvalidArgumentError, match="not a dtype"):
        embstore.load(str(srv.store / "kw.emb"), dtype=np.int32)


@pytest.mark.parametrize("dtype,np_dtype", [("float16", np.float16), ("f16", np.float16),
                                            ("bfloat16", "bfloat16"), ("bf16", "bfloat16")])
def test_f32_table_loads_as_half_precision_from_every_source(srv, dtype, np_dtype):
    import ml_dtypes
    want_dtype = np.dtype(ml_dtypes.bfloat16) if np_dtype == "bfloat16" else np.dtype(np_dtype)
    want = expected_matrix(300, 8).astype(want_dtype)  # values are exact in both
    for args, kw in _every_source(srv, "kw"):
        m = embstore.load(*args, dtype=dtype, rows=(3, 290), **kw)
        assert m.dtype == want_dtype and m.ctypes.data % 64 == 0
        np.testing.assert_array_equal(m, want[3:290])
    # F16 -> BF16 goes through float32 too.
    m = embstore.load(str(srv.store / "half.emb"), dtype="bf16")
    np.testing.assert_array_equal(m.astype(np.float32), expected_matrix(50, 6))


def test_narrowing_a_value_out_of_range_is_an_error(tmp_path, embstore_bin):
    import subprocess
    text = tmp_path / "big.txt"
    text.write_text("1 2\n3 70000\n")
    subprocess.run([str(embstore_bin), "convert", str(text), str(tmp_path / "big.emb")],
                   check=True, capture_output=True)
    with pytest.raises(embstore.errors.InvalidArgumentError,
                       match="row 1, column 1 holds 70000.0, which is out of range for float16"):
        embstore.load(str(tmp_path / "big.emb"), dtype="float16")
    assert embstore.load(str(tmp_path / "big.emb"), dtype="bf16")[1, 1] == 70144  # rounded


def test_progress_is_called_and_can_cancel_for_every_source(srv):
    for args, kw in _every_source(srv, "kw"):
        seen = []
        embstore.load(*args, progress=lambda d, t: seen.append((d, t)), **kw)
        assert seen and seen[-1][0] == seen[-1][1] == 300 * 8 * 4, (args, kw, seen)


def test_local_progress_can_cancel_and_timeout_applies(make_table_bin, tmp_path):
    path = write_table(make_table_bin, tmp_path / "big.emb", 200_000, 64, block_rows=4096)  # 51 MB
    calls = []

    def stop(done, total):
        calls.append(done)
        return False

    with pytest.raises(embstore.errors.CancelledError, match="big.emb"):
        embstore.load(str(path), progress=stop)
    assert len(calls) == 1 and calls[0] < 200_000 * 64 * 4
    # A timeout far shorter than the load: DeadlineExceeded naming the file, not a silent pass.
    with pytest.raises(embstore.errors.DeadlineExceededError, match="big.emb"):
        embstore.load(str(path), timeout=1e-9)
    with pytest.raises(embstore.errors.InvalidArgumentError, match="timeout"):
        embstore.load(str(path), timeout=-1)


def test_active_kernel_is_a_value():
    assert embstore.active_kernel in ("avx512", "avx2", "neon", "scalar")


def test_torch_validates_rows_once_for_every_entry_point(srv):
    torch = pytest.importorskip("torch")
    import embstore.torch
    path = str(srv.store / "kw.emb")
    for rows, match in [((5, 2), "begin is after end"), ((0, 301), "outside the table's 300"),
                        (("a", 3), "two integers")]:
        with pytest.raises(embstore.errors.InvalidArgumentError, match=match):
            embstore.torch.embedding(path, rows=rows)
        with pytest.raises(embstore.errors.InvalidArgumentError, match=match):
            embstore.torch.load_into(torch.zeros(3, 8), path, rows=rows)
    with pytest.raises(embstore.errors.InvalidArgumentError, match=r"rows=\(10, 10\).*empty"):
        embstore.torch.embedding(path, rows=(10, 10))
    empty = torch.zeros(0, 8)
    assert embstore.torch.load_into(empty, path, rows=(10, 10)) is empty
    w = torch.zeros(7, 8, dtype=torch.float16)  # F32 table into a float16 tensor
    embstore.torch.load_into(w, srv.tcp, "kw", rows=slice(20, 27), local=False)
    np.testing.assert_array_equal(w.float().numpy(), expected_matrix(300, 8)[20:27])


def test_bad_table_names_are_the_same_error_from_a_store_directory_and_a_server(srv):
    for source in (str(srv.store), srv.unix):
        for name, why in [("a\0b", "contains a NUL byte"), ("../x", "starts with '.'"),
                          ("a/b", "contains '/'"), ("", "empty")]:
            with pytest.raises(embstore.errors.InvalidArgumentError, match=why):
                embstore.load(source, name)


def test_a_header_byte_that_is_not_utf8_is_a_corruption_error(make_table_bin, tmp_path):
    path = write_table(make_table_bin, tmp_path / "t.emb", 10, 4)
    data = bytearray(path.read_bytes())
    at = data.index(b"embstore-table")
    data[at:at + 2] = b"\xff\xfe"
    path.write_bytes(bytes(data))
    with pytest.raises(embstore.errors.CorruptionError, match=r"t\.emb.*\\xff"):
        embstore.load(str(path))


def test_out_reuses_the_callers_array_and_checks_it(srv):
    path = str(srv.store / "kw.emb")
    buf = embstore.aligned_empty((300, 8), np.float32)
    for args, kw in _every_source(srv, "kw"):
        buf[:] = -1
        assert embstore.load(*args, out=buf, **kw) is buf
        np.testing.assert_array_equal(buf, expected_matrix(300, 8))
    part = np.zeros((10, 8), np.float32)
    embstore.load(path, rows=(5, 15), out=part)
    np.testing.assert_array_equal(part, expected_matrix(300, 8)[5:15])
    for bad, match in [(np.zeros((299, 8), np.float32), r"float32\[299, 8\]"),
                       (np.zeros((300, 8), np.float64), "float64"),
                       (np.zeros((8, 300), np.float32).T, "C-contiguous"),
                       ([0] * 10, "numpy array")]:
        with pytest.raises(embstore.errors.InvalidArgumentError, match=match):
            embstore.load(path, out=bad)
