"""SIGINT, SIGTERM or SIGHUP while convert, pull or export writes: the process dies of the signal
(its exit status says which) and leaves no ".OUT.tmp-*" file behind."""
import contextlib
import os
import signal
import subprocess
import time

import pytest

from conftest import as_from_a_terminal, wait_for_table, write_table


_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _kill_once_writing(cmd, outdir, sig):
    """Starts cmd, sends `sig` as soon as its temporary output exists; returns the exit status,
    or None when the command finished before it could be signalled."""
    proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, preexec_fn=as_from_a_terminal)
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        if any(".tmp-" in n for n in os.listdir(outdir)):
            proc.send_signal(sig)
            break
    proc.wait(timeout=60)
    return proc.returncode


@pytest.mark.parametrize("sig", _SIGNALS)
def test_convert_removes_its_temporary_file(embstore_bin, tmp_path, sig):
    # convert reads stdin, which stays open: once its temporary file exists it waits for more
    # input, so the signal always lands mid-write, however fast the machine.
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.Popen([str(embstore_bin), "convert", "-", str(out / "m.emb")],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=as_from_a_terminal)
    lines = (" ".join(["-0.0123456789"] * 128) + "\n").encode() * 1000  # 1.8 MB
    try:
        for _ in range(200):  # up to 360 MB
            proc.stdin.write(lines)
            proc.stdin.flush()
            if any(".tmp-" in n for n in os.listdir(out)):
                break
        assert any(".tmp-" in n for n in os.listdir(out)), "no temporary file after 360 MB"
        proc.send_signal(sig)
        assert proc.wait(timeout=60) == -sig
    finally:
        proc.kill()
        proc.wait()
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.close()
    assert os.listdir(out) == []


@pytest.mark.parametrize("command", ["pull", "export"])
def test_pull_and_export_remove_their_temporary_files(embstore_bin, make_table_bin, server,
                                                      tmp_path, command):
    write_table(make_table_bin, server.store / "t.emb", 400_000, 128, keys=True)  # 205 MB
    wait_for_table(server.unix, "t")
    out = tmp_path / "out"
    out.mkdir()
    cmd = {"pull": [embstore_bin, "pull", "--from", server.unix, "--table", "t", "--out",
                    out / "t.emb", "--no-local"],
           "export": [embstore_bin, "export", server.store / "t.emb", out / "t.npy", "--keys",
                      out / "t.keys"]}[command]
    rc = _kill_once_writing(cmd, out, signal.SIGTERM)
    if rc == 0:
        pytest.skip(f"{command} finished before the signal")
    assert rc == -signal.SIGTERM, rc
    assert os.listdir(out) == []
