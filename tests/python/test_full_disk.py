"""Every writer on a full disk: a clear "No space left on device" naming the file, no crash
(SIGBUS), and no temporary file left to keep the disk full. Runs on a 20 MB tmpfs, which needs
root (as CI has); skipped elsewhere."""
import os

import pytest

from conftest import run, wait_for_table, write_table


def _assert_failed_cleanly(r, disk, what):
    assert r.returncode == 1, f"{what}: exit {r.returncode}\n{r.stderr}"
    assert "No space left on device" in r.stderr, r.stderr
    assert str(disk) in r.stderr, r.stderr
    assert os.listdir(disk) == [], f"{what} left {os.listdir(disk)}"
    st = os.statvfs(disk)
    assert st.f_bfree == st.f_blocks, f"{what}: the disk is not empty again"


@pytest.fixture
def table_50mb(make_table_bin, server):
    write_table(make_table_bin, server.store / "t.emb", 100_000, 128, keys=True)
    wait_for_table(server.unix, "t")
    return server


@pytest.mark.parametrize("out,extra", [("x.npy", []), ("x.npy", ["--no-local"]),
                                       ("x.emb", []), ("x.emb", ["--no-local"])])
def test_pull_into_a_full_disk(embstore_bin, table_50mb, small_disk, out, extra):
    r = run([embstore_bin, "pull", "--from", table_50mb.unix, "--table", "t", "--out",
             small_disk / out, *extra])
    _assert_failed_cleanly(r, small_disk, f"pull {out} {extra}")


def test_export_into_a_full_disk(embstore_bin, table_50mb, small_disk):
    r = run([embstore_bin, "export", table_50mb.store / "t.emb", small_disk / "x.npy",
             "--keys", small_disk / "x.keys"])
    _assert_failed_cleanly(r, small_disk, "export")


def test_convert_into_a_full_disk(embstore_bin, tmp_path, small_disk):
    text = tmp_path / "m.txt"
    with open(text, "w") as f:
        line = " ".join(["0.125"] * 256) + "\n"
        f.writelines(line for _ in range(25_000))  # 25,000 x 256 f32 = 25.6 MB of table
    r = run([embstore_bin, "convert", text, small_disk / "m.emb"])
    _assert_failed_cleanly(r, small_disk, "convert")
