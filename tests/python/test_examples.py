"""Every example in examples/ runs against a real server."""
import os
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


@pytest.mark.parametrize("example", EXAMPLES)
def test_example_runs(demo_server, example):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    out = subprocess.run([sys.executable, str(ROOT / "examples" / example), "--source",
                          demo_server.unix, "--table", "sample"],
                         capture_output=True, text=True, env=env, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "sample" in out.stdout or "2000" in out.stdout or "pairs" in out.stdout


def test_torch_distributed_example_under_torchrun(demo_server):
    pytest.importorskip("torch.distributed.checkpoint")
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "4",
                          str(ROOT / "examples" / "torch_distributed.py"), "--source",
                          demo_server.unix, "--table", "sample"],
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "FSDP2: rank 0 of 4 holds (500, 16) of sample (2000 x 16)" in out.stdout, out.stdout
    assert "rank 0 read 500 rows" in out.stdout and "DCP: emb.weight filled" in out.stdout


def test_examples_exist():
    assert set(EXAMPLES) >= {"tf1_item_mat.py", "monitored_session_hook.py", "keras_embedding.py",
                             "tf_data_pipeline.py", "torch_embedding.py", "torch_distributed.py"}
