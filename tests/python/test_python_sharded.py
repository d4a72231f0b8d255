"""embstore.load() on a shard manifest: one table split over three `embstore serve` processes."""
import json

import numpy as np
import pytest

import embstore
from conftest import expected_matrix
from test_cli_sharded import BOUNDS, DIM, ROWS, shards, stop  # noqa: F401  (fixture)


def test_load_whole_table_and_row_ranges(shards):  # noqa: F811
    manifest, _, _ = shards
    want = expected_matrix(ROWS, DIM)
    seen = []
    got = embstore.load(manifest, local=False, progress=lambda done, total: seen.append(total))
    np.testing.assert_array_equal(got, want)
    assert got.flags.writeable and got.ctypes.data % embstore.ALIGNMENT == 0
    assert seen and seen[-1] == ROWS * DIM * 4
    np.testing.assert_array_equal(embstore.load(manifest, rows=(990, 2210)), want[990:2210])
    np.testing.assert_array_equal(embstore.load(manifest, "items", rows=slice(5, 7)), want[5:7])

    src = embstore.Source.resolve(manifest)
    assert src.kind == "manifest"
    assert src.list_tables() == ["items"]
    desc = src.describe()
    assert (desc["rows"], desc["dim"], desc["dtype"]) == (ROWS, DIM, "F32")
    assert desc["has_keys"] is True
    assert src.keys(begin=998, end=1002) == ["k998", "k999", "k1000", "k1001"]


def test_keys_are_looked_up_on_whichever_shard_holds_them(shards):  # noqa: F811
    manifest, _, _ = shards
    want = expected_matrix(ROWS, DIM)
    # Rows of every shard, shard boundaries, a repeat, in the trainer's order.
    rows = [2999, 5, 1000, 999, 2200, 2199, 0, 1500, 5]
    for local in (False, True):
        got = embstore.load(manifest, keys=[f"k{r}" for r in rows], local=local)
        np.testing.assert_array_equal(got, want[rows])
        half = embstore.load(manifest, keys=["k2500", "k10"], dtype="float16", local=local)
        np.testing.assert_array_equal(half, want[[2500, 10]].astype(np.float16))
    with pytest.raises(embstore.errors.MissingKeysError) as e:
        embstore.load(manifest, keys=["k1", "nope", "k2100"])
    assert e.value.missing == ["nope"]
    filled = embstore.load(manifest, keys=["nope", "k2100"], missing="zeros")
    np.testing.assert_array_equal(filled, np.stack([np.zeros(DIM, np.float32), want[2100]]))


def test_unsupported_and_wrong_uses_are_clear(shards):  # noqa: F811
    manifest, _, _ = shards
    with pytest.raises(embstore.errors.InvalidArgumentError, match="copy=False"):
        embstore.load(manifest, copy=False)
    with pytest.raises(embstore.errors.InvalidArgumentError, match="not 'other'"):
        embstore.load(manifest, "other")


def test_a_down_shard_is_named(shards):  # noqa: F811
    manifest, procs, targets = shards
    stop(procs[1])
    with pytest.raises(embstore.errors.UnavailableError) as e:
        embstore.load(manifest, rpc_timeout=5)
    assert "shard 1" in str(e.value) and targets[1] in str(e.value)


def test_bad_manifest_names_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "embstore-shards/1", "table": "t", "rows": 4, "dim": 2,
                               "dtype": "F32", "shards": []}))
    with pytest.raises(embstore.errors.InvalidArgumentError) as e:
        embstore.load(bad)
    assert str(bad) in str(e.value) and "cover rows [0, 0)" in str(e.value)
