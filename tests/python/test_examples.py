"""Every example in examples/ runs against a real server.

An example runs where its framework is installed: those that use tf.estimator in .venv-tf215
(TensorFlow 2.15; scripts/test.sh runs this file there too), those that import torch where torch
is; elsewhere each says why it is skipped.
"""
import importlib.util
import os
import socket
import subprocess
import sys

import pytest

from conftest import ROOT, wait_for_table, write_table

EXAMPLES = sorted(p.name for p in (ROOT / "examples").glob("*.py") if not p.name.startswith("_"))


@pytest.fixture(scope="module")
def demo_server(make_table_bin, embstore_bin, tmp_path_factory):
    from conftest import ServerProcess
    d = tmp_path_factory.mktemp("examples")
    store = d / "store"
    store.mkdir()
    write_table(make_table_bin, store / "sample.emb", 2000, 16, keys=True)
    srv = ServerProcess(embstore_bin, store, d)
    wait_for_table(srv.unix, "sample")
    yield srv
    srv.stop()


# What an example's text uses -> (the module that must be importable, why).
NEEDS = [("tf.estimator", "tensorflow_estimator",
          "tf.estimator: TensorFlow 2.15 and earlier (.venv-tf215)"),
         ("import torch", "torch", "torch"),
         ("import tensorflow", "tensorflow", "tensorflow")]


def _missing(example):
    text = (ROOT / "examples" / example).read_text()
    for needle, module, what in NEEDS:
        if needle in text and importlib.util.find_spec(module) is None:
            return what
    return None


@pytest.mark.parametrize("example", EXAMPLES)
def test_example_runs(demo_server, example):
    missing = _missing(example)
    if missing:
        pytest.skip(f"{example} needs {missing}, which this environment does not have")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    out = subprocess.run([sys.executable, str(ROOT / "examples" / example), "--source",
                          demo_server.unix, "--table", "sample"],
                         capture_output=True, text=True, env=env, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "sample" in out.stdout or "2000" in out.stdout or "pairs" in out.stdout


def test_torch_distributed_example_under_torchrun(demo_server):
    pytest.importorskip("torch.distributed.checkpoint")
    # A static rendezvous on 127.0.0.1: without --master-port, torchrun rendezvous at
    # "localhost", which a machine without /etc/hosts (a bare container or chroot) cannot resolve.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "4",
                          "--master-addr", "127.0.0.1", "--master-port", str(port),
                          str(ROOT / "examples" / "torch_distributed.py"), "--source",
                          demo_server.unix, "--table", "sample"],
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "FSDP2: rank 0 of 4 holds (500, 16) of sample (2000 x 16)" in out.stdout, out.stdout
    assert "rank 0 read 500 rows" in out.stdout and "DCP: emb.weight filled" in out.stdout


def test_examples_exist():
    assert set(EXAMPLES) >= {"tf1_item_mat.py", "monitored_session_hook.py", "keras_embedding.py",
                             "tf_data_pipeline.py", "torch_embedding.py", "torch_distributed.py"}
