"""Table files truncated in place while a reader copies them: every reader of mapped memory ends
with a clear error naming the file, never SIGBUS, and leaves no temporary files.

Files are only ever replaced by rename in embstore, but other tools (cp over a file, a full disk
during rsync --inplace, an operator's truncate) rewrite files in place."""
import os
import subprocess
import sys

import pytest

import embstore
from conftest import ServerProcess, wait_for_table, write_table

ROWS, DIM = 300_000, 64  # 77 MB: a copy takes long enough to be caught in the middle


@pytest.fixture
def big(make_table_bin, tmp_path):
    return write_table(make_table_bin, tmp_path / "big.emb", ROWS, DIM, keys=False,
                       block_rows=4096)


def _truncate_on_first_progress(path):
    done = []

    def progress(d, t):
        if not done:
            os.truncate(path, 64 << 10)
            done.append(d)
        return True

    return progress


@pytest.mark.parametrize("verify", [True, False])
def test_python_load_of_a_file_truncated_mid_copy(big, verify):
    with pytest.raises(embstore.errors.CorruptionError, match="big.emb"):
        embstore.load(str(big), verify=verify, progress=_truncate_on_first_progress(big))


def test_python_load_through_the_servers_local_path(make_table_bin, server):
    path = write_table(make_table_bin, server.store / "big.emb", ROWS, DIM, block_rows=4096)
    wait_for_table(server.unix, "big")
    with pytest.raises(embstore.errors.EmbstoreError, match="big"):
        embstore.load(server.unix, "big", local=True,
                      progress=_truncate_on_first_progress(path))
    assert server.proc.poll() is None, "the server died:\n" + server.log()


def _race(cmd, path):
    """Runs cmd and truncates `path` as soon as the command has mapped it. Returns (returncode,
    stderr); retries with a fresh copy of the file until the truncation landed while the command
    was still reading (a fast machine may finish first)."""
    original = path.read_bytes()
    for _ in range(10):
        path.write_bytes(original)
        proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        maps = f"/proc/{proc.pid}/maps"
        while proc.poll() is None:
            try:
                with open(maps) as f:
                    if str(path) in f.read():
                        break
            except OSError:
                break
        os.truncate(path, 64 << 10)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode not in (-7, 135), f"killed by SIGBUS: {err}"
        if proc.returncode != 0:
            return proc.returncode, err
    pytest.skip("the command finished before the truncation every time")


@pytest.mark.parametrize("command", ["verify", "export"])
def test_cli_readers_of_a_file_truncated_underneath(embstore_bin, big, tmp_path, command):
    args = {"verify": [big], "export": [big, tmp_path / "out.npy", "--force"]}[command]
    rc, err = _race([embstore_bin, command, *args], big)
    assert rc == 1, err
    assert "big.emb" in err and "Bad address" not in err, err
    assert not [n for n in os.listdir(tmp_path) if ".tmp" in n], os.listdir(tmp_path)


# --- Key lookups in a table truncated in place ------------------------------------------------------
# The lost part of the key index reads as zero pages, which never hold an empty slot: a probe
# bounded only by finding one spun forever (the client at 100% CPU; on a server, a thread that
# kept burning CPU and a SIGTERM that no longer stopped it).

KEYED_ROWS = 200_000  # 51 MB of rows and 3 MB of keys


def _truncate_past_header(path):
    with open(path, "rb") as f:
        header_end = 8 + int.from_bytes(f.read(8), "little")
    os.truncate(path, header_end + 4096)


_LOOKUP_AFTER_TRUNCATION = """
import os, sys, time
import embstore
path, target = sys.argv[1], sys.argv[2]
src = embstore.Source.resolve(target) if target != "-" else embstore.Source.resolve(path)
kw = {"local": False} if target != "-" else {}
table = "keyed" if target != "-" else None
first = embstore.load(src, table, keys=["k1", "k7", "k199999"], **kw)
with open(path, "rb") as f:
    header_end = 8 + int.from_bytes(f.read(8), "little")
os.truncate(path, header_end + 4096)
start = time.monotonic()
try:
    embstore.load(src, table, keys=["k3", "k12345", "no-such-key"], missing="zeros", **kw)
    print("LOADED")
except embstore.EmbstoreError as e:
    print(type(e).__name__, e)
print("SECONDS", time.monotonic() - start)
"""


def _lookup_after_truncation(path, target, tmp_path):
    script = tmp_path / "lookup.py"
    script.write_text(_LOOKUP_AFTER_TRUNCATION)
    proc = subprocess.run([sys.executable, str(script), str(path), target], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_key_lookup_in_a_table_truncated_under_an_open_source_is_corruption(make_table_bin,
                                                                           tmp_path):
    path = write_table(make_table_bin, tmp_path / "keyed.emb", KEYED_ROWS, DIM, keys=True,
                       block_rows=4096)
    out = _lookup_after_truncation(path, "-", tmp_path)
    assert out.startswith("CorruptionError"), out
    assert "keyed.emb" in out, out


def test_key_lookup_on_a_server_whose_table_was_truncated_is_data_loss(embstore_bin,
                                                                      make_table_bin, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    path = write_table(make_table_bin, store / "keyed.emb", KEYED_ROWS, DIM, keys=True,
                       block_rows=4096)
    # The server maps the table at start and never rescans during the test: a rescan after the
    # truncation would drop the table (NotFound, also right), and which came first would race.
    server = ServerProcess(embstore_bin, store, tmp_path, poll_interval_ms=3_600_000)
    try:
        wait_for_table(server.unix, "keyed")
        out = _lookup_after_truncation(path, server.unix, tmp_path)
        # DATA_LOSS from the server, which the client raises as CorruptionError naming the
        # table.
        assert out.startswith("CorruptionError"), out
        assert "keyed" in out, out
        assert server.proc.poll() is None, "the server died:\n" + server.log()
        # The server is not left spinning: it answers, and stops on SIGTERM within its grace.
        assert embstore.Source.resolve(server.unix).list_tables() is not None
        server.proc.terminate()
        server.proc.wait(timeout=20)
    finally:
        server.stop()
