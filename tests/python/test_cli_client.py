"""`embstore pull` and `embstore ls` against a real `embstore serve`."""
import json
import shutil
import subprocess

import ml_dtypes  # noqa: F401  (bfloat16 for numpy)
import numpy as np
import pytest

import embstore

from conftest import ServerProcess, expected_matrix, run, wait_for_table, write_table


@pytest.fixture
def tables(make_table_bin, server):
    write_table(make_table_bin, server.store / "items.emb", 1000, 8, keys=True, block_rows=64)
    write_table(make_table_bin, server.store / "half.emb", 40, 3, dtype="bf16")
    wait_for_table(server.unix, "items")
    wait_for_table(server.unix, "half")
    return server


def test_ls(embstore_bin, tables):
    out = run([embstore_bin, "ls", "--from", tables.tcp])
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["NAME", "ROWS", "DIM", "DTYPE", "KEYS", "BYTES"]
    assert lines[1].split()[:5] == ["half", "40", "3", "BF16", "no"]
    assert lines[2].split()[:5] == ["items", "1000", "8", "F32", "yes"]
    listing = json.loads(run([embstore_bin, "ls", "--from", tables.unix, "--json"]).stdout)
    assert [t["name"] for t in listing] == ["half", "items"]
    assert listing[1]["bytes"] == 1000 * 8 * 4


@pytest.mark.parametrize("local", [True, False])
def test_pull_npy(embstore_bin, tables, tmp_path, local):
    out_path = tmp_path / "items.npy"
    cmd = [embstore_bin, "pull", "--from", tables.tcp, "--table", "items", "--out", out_path,
           "--streams", "3"]
    if not local:
        cmd.append("--no-local")
    out = run(cmd)
    assert out.returncode == 0, out.stderr
    assert "pulled items rows [0, 1000)" in out.stdout
    assert ("local file" in out.stdout) == local
    np.testing.assert_array_equal(np.load(out_path), expected_matrix(1000, 8))


def test_pull_row_range_and_bf16(embstore_bin, tables, tmp_path):
    out = run([embstore_bin, "pull", "--from", tables.unix, "--table", "items", "--rows", "100:250",
               "--out", tmp_path / "part.npy", "--no-local"])
    assert out.returncode == 0, out.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "part.npy"), expected_matrix(1000, 8)[100:250])
    out = run([embstore_bin, "pull", "--from", tables.unix, "--table", "half",
               "--out", tmp_path / "half.npy", "--no-local"])
    assert out.returncode == 0, out.stderr
    m = np.load(tmp_path / "half.npy")
    assert m.dtype == np.float32
    np.testing.assert_array_equal(m, expected_matrix(40, 3))


def test_pull_emb_keeps_keys_and_metadata(embstore_bin, tables, tmp_path):
    dest = tmp_path / "copy.emb"
    out = run([embstore_bin, "pull", "--from", tables.unix, "--table", "items", "--rows", ":300",
               "--out", dest, "--no-local"])
    assert out.returncode == 0, out.stderr
    info = json.loads(run([embstore_bin, "inspect", dest, "--json"]).stdout)
    assert (info["rows"], info["dim"], info["dtype"], info["has_keys"]) == (300, 8, "F32", True)
    assert info["first_keys"][:2] == ["k0", "k1"]
    assert info["metadata"]["generator"] == "embstore_make_test_table"
    assert run([embstore_bin, "verify", dest]).returncode == 0


def test_pull_errors_are_clear_and_leave_nothing(embstore_bin, tables, tmp_path):
    tmp_path = tmp_path / "out"
    tmp_path.mkdir()
    dest = tmp_path / "x.npy"
    out = run([embstore_bin, "pull", "--from", tables.unix, "--table", "nope", "--out", dest])
    assert out.returncode == 1 and "nope" in out.stderr
    out = run([embstore_bin, "pull", "--from", "127.0.0.1:1", "--table", "items", "--out", dest,
               "--rpc-timeout", "2"])
    assert out.returncode == 1 and "127.0.0.1:1" in out.stderr
    out = run([embstore_bin, "pull", "--from", "nonsense", "--table", "items", "--out", dest])
    assert out.returncode == 2 and "nonsense" in out.stderr
    out = run([embstore_bin, "pull", "--from", tables.unix, "--table", "items", "--out", dest,
               "--rows", "5:2000"])
    assert out.returncode == 1 and "outside" in out.stderr
    out = run([embstore_bin, "pull", "--from", tables.unix, "--table", "items",
               "--out", tmp_path / "x.txt"])
    assert out.returncode == 2 and ".npy or .emb" in out.stderr
    assert list(tmp_path.iterdir()) == []

    dest.write_bytes(b"keep me")
    out = run([embstore_bin, "pull", "--from", tables.unix, "--table", "items", "--out", dest])
    assert out.returncode == 1 and "already exists" in out.stderr
    assert "use --force to replace it" in out.stderr
    assert dest.read_bytes() == b"keep me"
    # Library errors name options by their API names; the CLI and Python each say how to set
    # them in their own terms.
    half = run([embstore_bin, "pull", "--from", tables.unix, "--table", "items", "--out",
                tmp_path / "h.npy", "--tls-cert", dest])
    assert half.returncode == 2 and "(--tls-cert and --tls-key)" in half.stderr, half.stderr
    with pytest.raises(embstore.errors.InvalidArgumentError, match=r"\(tls_cert= and tls_key=\)"):
        embstore.load(tables.unix, "items", tls_cert=str(dest))
    # Numeric flags out of range say what they wanted.
    zero = run([embstore_bin, "pull", "--from", tables.unix, "--table", "items", "--out",
                tmp_path / "z.npy", "--rpc-timeout", "0"])
    assert zero.returncode == 2 and "--rpc-timeout: must be a positive number, not 0" in \
        zero.stderr, zero.stderr
    serve = run([embstore_bin, "serve", "--store", tmp_path, "--listen", "127.0.0.1:0",
                 "--max-streams", "0"])
    assert serve.returncode == 2 and "--max-streams: must be a positive number, not 0" in \
        serve.stderr, serve.stderr
    out = run([embstore_bin, "pull", "--from", tables.unix, "--table", "items", "--out", dest,
               "--force"])
    assert out.returncode == 0, out.stderr
    assert np.load(dest).shape == (1000, 8)


def test_bearer_tokens(embstore_bin, make_table_bin, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    write_table(make_table_bin, store / "t.emb", 10, 4)
    (tmp_path / "tokens").write_text("# tokens\nletmein\n")
    srv = ServerProcess(embstore_bin, store, tmp_path,
                        extra=["--auth-token-file", str(tmp_path / "tokens")])
    try:
        out = run([embstore_bin, "ls", "--from", srv.unix])
        assert out.returncode == 1 and "refused the credentials" in out.stderr
        out = run([embstore_bin, "ls", "--from", srv.unix, "--token", "wrong"])
        assert out.returncode == 1
        (tmp_path / "mytoken").write_text("letmein\n")
        out = run([embstore_bin, "ls", "--from", srv.unix, "--token-file", tmp_path / "mytoken"])
        assert out.returncode == 0, out.stderr
        assert "t " in out.stdout
        out = run([embstore_bin, "ls", "--from", srv.unix, "--token-file", tmp_path / "missing"])
        assert out.returncode == 2 and "--token-file" in out.stderr and "missing" in out.stderr
        (tmp_path / "empty").write_text("")
        out = run([embstore_bin, "ls", "--from", srv.unix, "--token-file", tmp_path / "empty"])
        assert out.returncode != 0 and "does not start with a token line" in out.stderr
    finally:
        srv.stop()


def _make_certs(d):
    """A throwaway CA and a server certificate for localhost/127.0.0.1, made with openssl."""
    def ssl(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)
    ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=test-ca",
        "-keyout", "ca.key", "-out", "ca.pem")
    ssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", "srv.key",
        "-out", "srv.csr")
    (d / "ext.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    ssl("x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-days", "1", "-extfile", "ext.cnf", "-out", "srv.pem")
    ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=other-ca",
        "-keyout", "other.key", "-out", "other.pem")


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl tool")
def test_tls(embstore_bin, make_table_bin, tmp_path):
    _make_certs(tmp_path)
    store = tmp_path / "store"
    store.mkdir()
    write_table(make_table_bin, store / "t.emb", 10, 4)
    srv = ServerProcess(embstore_bin, store, tmp_path,
                        extra=["--tls-cert", str(tmp_path / "srv.pem"),
                               "--tls-key", str(tmp_path / "srv.key")])
    try:
        ok = run([embstore_bin, "pull", "--from", srv.tcp, "--table", "t", "--out",
                  tmp_path / "t.npy", "--tls-ca", tmp_path / "ca.pem", "--no-local"])
        assert ok.returncode == 0, ok.stderr
        np.testing.assert_array_equal(np.load(tmp_path / "t.npy"), expected_matrix(10, 4))
        plain = run([embstore_bin, "ls", "--from", srv.tcp, "--rpc-timeout", "3"])
        assert plain.returncode == 1 and srv.tcp in plain.stderr
        wrong_ca = run([embstore_bin, "ls", "--from", srv.tcp, "--tls-ca", tmp_path / "other.pem",
                        "--rpc-timeout", "3"])
        assert wrong_ca.returncode == 1 and srv.tcp in wrong_ca.stderr
    finally:
        srv.stop()
