"""embstore.torch under real torch.distributed: four gloo ranks on this host, each its own process
(tests/python/torch_dist_worker.py), started once per test. The ranks assert their own shards
against the table; the server's embstore_bytes_served_total shows what the job read."""
import json
import subprocess
import sys
import time

import pytest

pytest.importorskip("torch")
pytest.importorskip("torch.distributed.checkpoint")

from conftest import ROOT, ServerProcess, _free_port, wait_for_table, write_table  # noqa: E402

WORKER = ROOT / "tests" / "python" / "torch_dist_worker.py"
WORLD = 4
ROWS, DIM = 4003, 18  # uneven row and column shards over 4 ranks


@pytest.fixture
def setup(make_table_bin, embstore_bin, tmp_path):
    """The table as a file, and served by a server with a metrics endpoint."""
    path = write_table(make_table_bin, tmp_path / "words.emb", ROWS, DIM)
    store = tmp_path / "store"
    store.mkdir()
    write_table(make_table_bin, store / "words.emb", ROWS, DIM)
    metrics = f"127.0.0.1:{_free_port()}"
    srv = ServerProcess(embstore_bin, store, tmp_path, extra=["--metrics-listen", metrics])
    wait_for_table(srv.unix, "words")
    yield {"file": str(path), "server": srv.unix, "metrics": f"http://{metrics}/metrics",
           "table": "words", "rows": ROWS, "dim": DIM}
    srv.stop()


def run_ranks(tmp_path, scenario, args, timeout=180):
    """Starts WORLD ranks of `scenario`; returns each rank's stdout once all succeeded."""
    init = tmp_path / f"init-{scenario}"
    procs = [subprocess.Popen([sys.executable, str(WORKER), str(rank), str(WORLD), str(init),
                               scenario, json.dumps(args)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              cwd=WORKER.parent)
             for rank in range(WORLD)]
    outs = []
    deadline = time.monotonic() + timeout
    try:
        for p in procs:
            outs.append(p.communicate(timeout=max(1.0, deadline - time.monotonic()))[0])
    except subprocess.TimeoutExpired:
        pass  # a rank that failed can leave the others waiting in a collective
    finally:
        for p in procs[len(outs):]:
            p.kill()
            outs.append(p.communicate()[0])
    report = "\n".join(f"--- rank {r} (exit {p.returncode})\n{o}"
                       for r, (p, o) in enumerate(zip(procs, outs)))
    assert all(p.returncode == 0 for p in procs), report
    return outs


def results(out):
    return [json.loads(line[len("RESULT "):]) for line in out.splitlines()
            if line.startswith("RESULT ")]


def test_load_sharded_fills_each_rank_from_its_own_rows(setup, tmp_path):
    outs = run_ranks(tmp_path, "sharded", setup)
    for out in outs:  # every placement, both sources, on every rank
        for name in ("shard0", "shard1", "shard1_chunks", "replicate", "mesh2_shard0_shard1",
                     "mesh2_replicate_shard0", "mesh2_shard1_replicate", "mesh2_shard0_shard0",
                     "rows", "fsdp2", "fsdp2_forward", "torch.bfloat16/S(1)",
                     "torch.float16/S(0)"):
            for kind in ("file", "server"):
                assert f"ok {kind}/{name}" in out, (name, out)
        assert "ok wrong_uses" in out
    (res,) = results(outs[0])
    # Shard(0): the ranks' rows are disjoint, so the job reads the table exactly once.
    assert res["served"]["shard0"] == res["table_bytes"]
    # Shard(1): the format is row-major, so every rank reads every row.
    assert res["served"]["shard1"] == WORLD * res["table_bytes"]


def test_dcp_load_through_storage_reader(setup, tmp_path):
    outs = run_ranks(tmp_path, "dcp", setup)
    for out in outs:
        for kind in ("file", "server"):
            for name in ("rows", "cols", "grid", "part", "plain", "fsdp2",
                         "fsdp2_others_untouched"):
                assert f"ok {kind}/dcp/{name}" in out, (name, out)
    (res,) = results(outs[0])
    assert res["served"] == res["table_bytes"]


def test_broadcast_load_reads_the_table_about_once(setup, tmp_path):
    outs = run_ranks(tmp_path, "broadcast", setup)
    for out in outs:
        for name in ("broadcast", "per_rank_full", "broadcast_uneven_bf16", "broadcast_subgroup",
                     "broadcast_failure_reaches_every_rank"):
            assert f"ok {name}" in out, (name, out)
    (res,) = results(outs[0])
    table = res["table_bytes"]
    assert res["broadcast"] <= 1.1 * table, res
    assert 3.9 * table <= res["per_rank_full"] <= 4.1 * table, res


# In this process, without a process group.

@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")
def test_storage_reader_loads_without_a_process_group(make_table_bin, tmp_path):
    import torch
    import torch.distributed.checkpoint as dcp

    import embstore.torch
    from conftest import expected_matrix
    table = write_table(make_table_bin, tmp_path / "words.emb", 300, 8)
    state = {"w": torch.zeros(300, 8), "half": {"rows": torch.zeros(100, 8, dtype=torch.float16)}}
    reader = embstore.torch.StorageReader(str(table), {"w": "words",
                                                       "half.rows": ("words", (200, 300))})
    dcp.load(state, storage_reader=reader, no_dist=True)
    assert torch.equal(state["w"], torch.from_numpy(expected_matrix(300, 8)))
    assert torch.equal(state["half"]["rows"],
                       torch.from_numpy(expected_matrix(300, 8)[200:]).half())
    assert not embstore.torch.StorageReader.validate_checkpoint_id(str(table))


def test_wrong_uses_are_clear_before_anything_is_read(make_table_bin, tmp_path):
    import torch

    import embstore
    import embstore.torch
    table = str(write_table(make_table_bin, tmp_path / "words.emb", 300, 8))
    errors = embstore.errors
    with pytest.raises(errors.InvalidArgumentError, match="fills a DTensor, not Tensor"):
        embstore.torch.load_sharded(torch.zeros(300, 8), table)
    with pytest.raises(errors.InvalidArgumentError, match="init_process_group"):
        embstore.torch.broadcast_load(torch.zeros(300, 8), table)
    with pytest.raises(errors.InvalidArgumentError, match="must be a table name"):
        embstore.torch.StorageReader(table, {"w": 3})
    with pytest.raises(errors.InvalidArgumentError, match="unexpected arguments"):
        embstore.torch.StorageReader(table, {"w": "words"}, stream=2)


def test_save_writes_each_row_range_once_with_a_manifest(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    outs = run_ranks(tmp_path, "save", {"rows": ROWS, "dim": DIM, "out": str(out)})
    for out_text in outs:
        for name in ("save_fsdp2", "save_replicated", "save_failure_reaches_every_rank"):
            assert f"ok {name}" in out_text, (name, out_text)
    assert sorted(p.name for p in out.iterdir()) == [
        "rep-0.emb", "rep.shards.json", "trained-0.emb", "trained-1.emb", "trained-2.emb",
        "trained-3.emb", "trained.shards.json"]
