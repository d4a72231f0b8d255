"""embstore.load where it once went wrong quietly: zero-copy views of damaged files, server
addresses whose port gRPC would wrap, timeouts that did not bound connecting, and arguments that
were accepted or refused with the wrong words."""
import os
import socket
import subprocess
import threading
import time

import numpy as np
import pytest

import embstore
from conftest import expected_matrix, flip_bits, run, wait_for_table, write_table

ROWS, DIM = 200_000, 64  # 51 MB


@pytest.fixture(scope="module")
def big(make_table_bin, tmp_path_factory):
    return write_table(make_table_bin, tmp_path_factory.mktemp("big") / "big.emb", ROWS, DIM,
                       block_rows=4096)


_flip = flip_bits


def test_zero_copy_view_of_a_damaged_file_is_never_handed_out_verified(big):
    # Once: 45 of 226 byte flips gave a view with the flipped bytes and no error.
    data_offset = embstore._native.Table(str(big)).data_offset
    rng = np.random.default_rng(3)
    want = expected_matrix(ROWS, DIM)
    for offset in rng.integers(data_offset, data_offset + ROWS * DIM * 4, size=60):
        offset = int(offset)
        _flip(big, offset)
        try:
            with pytest.raises(embstore.errors.CorruptionError, match="big.emb.*checksum"):
                embstore.load(str(big), copy=False)
            row = (offset - data_offset) // (DIM * 4)
            # Rows of blocks that are intact still view without a copy...
            block = row // 4096
            other = (block + 1) % (ROWS // 4096)
            v = embstore.load(str(big), copy=False, rows=(other * 4096, other * 4096 + 10))
            np.testing.assert_array_equal(v, want[other * 4096:other * 4096 + 10])
            # ...and an unverified view is there when asked for by name.
            raw = embstore.load(str(big), copy=False, verify=False)
            assert not np.array_equal(raw[row], want[row])
        finally:
            _flip(big, offset)
    v = embstore.load(str(big), copy=False)
    assert not v.flags.writeable
    np.testing.assert_array_equal(v, want)


def test_torch_from_file_verifies_before_mapping(big):
    torch = pytest.importorskip("torch")
    import embstore.torch as et
    data_offset = embstore._native.Table(str(big)).data_offset
    _flip(big, data_offset + 12345 * DIM * 4 + 7)
    try:
        with pytest.raises(embstore.errors.CorruptionError, match="big.emb"):
            et.from_file(str(big))
        t = et.from_file(str(big), verify=False)
        assert t.shape == (ROWS, DIM) and t.dtype == torch.float32
    finally:
        _flip(big, data_offset + 12345 * DIM * 4 + 7)
    np.testing.assert_array_equal(et.from_file(str(big)).numpy()[:100],
                                  expected_matrix(100, DIM))


# --- Addresses ---------------------------------------------------------------------------------

@pytest.fixture
def small_server(make_table_bin, server):
    write_table(make_table_bin, server.store / "kt.emb", 1000, 8, keys=True)
    wait_for_table(server.unix, "kt")
    return server


def test_a_port_out_of_range_is_refused_not_wrapped(small_server, embstore_bin, tmp_path):
    # Once: port 99999 reached the server on 99999 - 65536.
    port = int(small_server.tcp.rsplit(":", 1)[1])
    wrapped = f"127.0.0.1:{port + 65536}"
    with pytest.raises(embstore.errors.InvalidArgumentError,
                       match=f"'{wrapped}' has port {port + 65536}, which is out of range"):
        embstore.load(wrapped, "kt")
    for cmd in (["ls", "--from", wrapped],
                ["pull", "--from", wrapped, "--table", "kt", "--out", tmp_path / "kt.npy"]):
        out = run([embstore_bin, *cmd])
        assert out.returncode == 2, (cmd, out.stdout, out.stderr)
        assert "out of range" in out.stderr, out.stderr
    assert not (tmp_path / "kt.npy").exists()
    out = run([embstore_bin, "serve", "--store", small_server.store, "--listen",
               "127.0.0.1:70000"])
    assert out.returncode == 2, out.stderr
    assert "listen address '127.0.0.1:70000' has port 70000, which is out of range" in out.stderr
    # What is still right to write works.
    assert embstore.load(small_server.tcp, "kt").shape == (1000, 8)


def test_a_missing_file_whose_name_has_a_colon_is_not_found(tmp_path):
    with pytest.raises(embstore.errors.NotFoundError, match="v2:old.emb"):
        embstore.load(str(tmp_path / "v2:old.emb"))
    with pytest.raises(embstore.errors.InvalidArgumentError, match="not a decimal number"):
        embstore.load("localhost:fifty")


def test_timeout_bounds_connecting_to_a_server_that_never_answers(embstore_bin, tmp_path):
    # A socket that accepts and then says nothing: gRPC waits 20 s for its SETTINGS frame.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held = []
    stop = threading.Event()

    def accept():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        target = f"127.0.0.1:{listener.getsockname()[1]}"
        start = time.monotonic()
        with pytest.raises(embstore.errors.DeadlineExceededError):
            embstore.load(target, "kt", timeout=2)
        assert time.monotonic() - start < 10  # 20 s and UnavailableError before
        start = time.monotonic()
        out = run([embstore_bin, "pull", "--from", target, "--table", "kt", "--out",
                   tmp_path / "kt.npy", "--timeout", "2"])
        assert out.returncode == 1 and "deadline exceeded" in out.stderr, out.stderr
        assert time.monotonic() - start < 10
    finally:
        stop.set()
        t.join()
        for c in held:
            c.close()
        listener.close()


# --- Arguments ---------------------------------------------------------------------------------

def test_keys_that_are_not_valid_unicode_are_named(small_server):
    path = str(small_server.store / "kt.emb")
    with pytest.raises(embstore.errors.InvalidArgumentError,
                       match=r"keys\[1\] .* is not valid Unicode text.*surrogate"):
        embstore.load(path, keys=["k1", "bad\udcff", "k2"])
    assert embstore.load(path, keys=["k1", "k2"]).shape == (2, 8)


@pytest.mark.parametrize("rows", [(0.5, 10), (0, 10.0), (True, 5), ("0", "10"),
                                  (np.float64(1), 5)])
def test_rows_must_be_integers(small_server, rows):
    with pytest.raises(embstore.errors.InvalidArgumentError, match="two integers"):
        embstore.load(str(small_server.store / "kt.emb"), rows=rows)


def test_integer_types_still_work_as_rows(small_server):
    path = str(small_server.store / "kt.emb")
    got = embstore.load(path, rows=(np.int64(3), np.uint16(9)))
    np.testing.assert_array_equal(got, expected_matrix(9, 8)[3:9])


def test_a_table_the_server_rejected_says_why(small_server, make_table_bin):
    bad = small_server.store / "broken.emb"
    write_table(make_table_bin, bad, 5000, 8, block_rows=256)
    data = bytearray(bad.read_bytes())
    data[20] ^= 0xff  # inside the JSON header
    tmp = small_server.store / ".broken.tmp"
    tmp.write_bytes(bytes(data))
    os.rename(tmp, bad)
    deadline = time.monotonic() + 10
    while "broken" not in small_server.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(embstore.errors.NotFoundError,
                       match="table 'broken' is not served: its file in .* was rejected: "):
        embstore.load(small_server.unix, "broken", local=False)
    with pytest.raises(embstore.errors.NotFoundError, match="'nothere' not found"):
        embstore.load(small_server.unix, "nothere", local=False)


def _tensor_offset(path, name):
    """File offset of tensor `name` of a table (safetensors layout, docs/FORMAT.md)."""
    import json
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    return 8 + n + header[name]["data_offsets"][0]


def test_damaged_keys_on_a_server_name_the_table_once(small_server, embstore_bin, tmp_path):
    # Once: "table table 'kt': checksum mismatch in keys.bytes".
    path = small_server.store / "kt.emb"
    _flip(path, _tensor_offset(path, "keys.bytes") + 3)
    out = run([embstore_bin, "pull", "--from", small_server.unix, "--table", "kt", "--out",
               tmp_path / "kt.emb", "--no-local"])
    assert out.returncode == 1, out.stdout
    assert "table 'kt': " in out.stderr and "checksum mismatch in keys.bytes" in out.stderr, \
        out.stderr
    assert "table table" not in out.stderr, out.stderr
    assert not (tmp_path / "kt.emb").exists()


def test_parallel_pulls_right_after_serve_starts_never_resume(embstore_bin, make_table_bin,
                                                              tmp_path):
    # Once: "stream 2 resumes at row 8192: ... ipv4:127.0.0.1:PORT: No such file or directory"
    # on the first try of one of four streams: gRPC read errno after absl's first clock reading
    # had left ENOENT in it (client/src/transport/grpc_util.cc).
    from conftest import ServerProcess
    store = tmp_path / "store"
    store.mkdir()
    write_table(make_table_bin, store / "sample.emb", 100_000, 64, keys=True)  # 25 blocks
    for i in range(12):
        work = tmp_path / f"w{i}"
        work.mkdir()
        srv = ServerProcess(embstore_bin, store, work)
        try:
            streams = 4 if i % 2 == 0 else 8
            out = run([embstore_bin, "pull", "--from", srv.tcp, "--table", "sample", "--out",
                       work / "p.npy", "--streams", str(streams), "--no-local"])
            assert out.returncode == 0, out.stderr
            assert "resumes at" not in out.stderr, out.stderr
            assert f"{streams} streams, 0 resumes" in out.stdout, out.stdout
        finally:
            srv.stop()
