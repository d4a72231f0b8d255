"""embstore.save, embstore.convert and embstore.torch.save on one process: exact round trips,
correct rounding, keys, every bad input with a clear error and nothing left behind, a full disk
and signals mid-save. TensorFlow's writer is tested in test_save_tf.py, sharded torch saves in
test_torch_distributed.py, s3:// and hdfs:// destinations in test_s3.py and test_hdfs.py."""
import json
import os
import signal
import struct
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

import embstore
from conftest import as_from_a_terminal, run
from embstore import errors

BF16 = np.dtype(ml_dtypes.bfloat16)


def rng_matrix(rows, dim, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal((rows, dim)).astype(dtype)


def leftovers(folder):
    return sorted(p for p in os.listdir(folder))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16])
def test_round_trip_is_exact_in_the_arrays_own_dtype(tmp_path, embstore_bin, dtype):
    a = rng_matrix(5003, 40, 1).astype(dtype)
    dest = tmp_path / "t.emb"
    r = embstore.save(a, dest, chunk_rows=997)  # chunks that straddle checksum blocks
    assert r["rows"] == 5003 and r["dim"] == 40
    got = embstore.load(dest, dtype="native")
    assert got.dtype == a.dtype and np.array_equal(got.view(np.uint8), a.view(np.uint8))
    v = run([embstore_bin, "verify", dest])
    assert v.returncode == 0, v.stderr
    # Every table is a safetensors file; the library reads the same bits.
    from safetensors.numpy import load_file
    if dtype is not BF16:
        assert np.array_equal(load_file(str(dest))["embedding"], a)
    assert leftovers(tmp_path) == ["t.emb"]


def test_float64_is_stored_as_f32_rounded_once(tmp_path):
    a = rng_matrix(300, 7, 2, np.float64) * 1e3
    embstore.save(a, tmp_path / "t.emb")
    got = embstore.load(tmp_path / "t.emb", dtype="native")
    assert got.dtype == np.float32 and np.array_equal(got, a.astype(np.float32))


def test_narrowing_rounds_once_from_the_source_precision(tmp_path):
    # 1 + 2^-8 + 2^-40 lies just above the midpoint of two bfloat16 neighbours (1 and 1 + 2^-7):
    # correctly rounded it is 1 + 2^-7. Rounding through float32 first would lose the 2^-40,
    # land exactly on the midpoint and round to even: 1.0.
    tricky = 1 + 2.0 ** -8 + 2.0 ** -40
    a = np.array([[tricky, -tricky, 1 + 2.0 ** -8, 3.0e38]], dtype=np.float64)
    embstore.save(a, tmp_path / "b.emb", dtype="bf16")
    got = embstore.load(tmp_path / "b.emb", dtype="native").astype(np.float64)
    assert got[0, 0] == 1 + 2.0 ** -7 and got[0, 1] == -(1 + 2.0 ** -7)
    assert got[0, 2] == 1.0  # a true tie rounds to even
    # f16: numpy rounds float64 -> float16 directly and correctly; so must embstore.
    h = rng_matrix(2000, 16, 3, np.float64) * 300
    embstore.save(h, tmp_path / "h.emb", dtype="f16")
    assert np.array_equal(embstore.load(tmp_path / "h.emb", dtype="native"), h.astype(np.float16))
    # f32 -> f16 and f32 -> bf16: round to nearest even, as convert does.
    f = rng_matrix(2000, 16, 4) * 100
    embstore.save(f, tmp_path / "f.emb", dtype=np.float16)
    assert np.array_equal(embstore.load(tmp_path / "f.emb", dtype="native"), f.astype(np.float16))
    embstore.save(f, tmp_path / "g.emb", dtype="bfloat16")
    assert np.array_equal(embstore.load(tmp_path / "g.emb", dtype="native").view(np.uint16),
                          f.astype(BF16).view(np.uint16))


def test_save_matches_convert_of_the_same_values(tmp_path):
    a = rng_matrix(400, 12, 5) * 1e4
    text = tmp_path / "m.txt"
    np.savetxt(text, a.astype(np.float64), fmt="%.17g")
    for dtype in ("f32", "f16", "bf16"):
        embstore.save(a.astype(np.float64), tmp_path / f"s-{dtype}.emb", dtype=dtype)
        stats = embstore.convert(text, tmp_path / f"c-{dtype}.emb", dtype=dtype)
        assert stats["rows"] == 400 and stats["dim"] == 12 and stats["format"] == "matrix"
        assert np.array_equal(
            embstore.load(tmp_path / f"s-{dtype}.emb", dtype="native").view(np.uint8),
            embstore.load(tmp_path / f"c-{dtype}.emb", dtype="native").view(np.uint8)), dtype


def test_overflow_nan_and_inf(tmp_path):
    a = rng_matrix(100, 8, 6)
    a[37, 5] = 1e6
    a[3, 1] = np.nan
    with pytest.raises(errors.OutOfRangeError,
                       match=r"row 37, column 5 is too large for F16 \(on_overflow inf"):
        embstore.save(a, tmp_path / "t.emb", dtype="f16", chunk_rows=10)
    assert leftovers(tmp_path) == []
    embstore.save(a, tmp_path / "t.emb", dtype="f16", on_overflow="inf")
    got = embstore.load(tmp_path / "t.emb")
    assert got[37, 5] == np.inf and np.isnan(got[3, 1])
    with pytest.raises(errors.InvalidArgumentError, match="on_overflow"):
        embstore.save(a, tmp_path / "u.emb", dtype="f16", on_overflow="clip")
    big = np.full((2, 2), 1e300)
    with pytest.raises(errors.OutOfRangeError, match="too large for f32"):
        embstore.save(big, tmp_path / "u.emb")
    assert leftovers(tmp_path) == ["t.emb"]


def test_keys_round_trip_and_bad_keys(tmp_path):
    a = rng_matrix(3000, 8, 7)
    keys = [f"item-{i}" for i in range(3000)]
    keys[5] = "naïve"
    embstore.save(a, tmp_path / "k.emb", keys=keys, chunk_rows=256)
    got = embstore.load(tmp_path / "k.emb", keys=["item-2999", "naïve", "item-0"])
    assert np.array_equal(got, a[[2999, 5, 0]])
    dup = list(keys)
    dup[2500] = "item-17"
    with pytest.raises(errors.AlreadyExistsError, match="key 'item-17' of row 2500 repeats row 17"):
        embstore.save(a, tmp_path / "d.emb", keys=dup, chunk_rows=256)
    empty = list(keys)
    empty[9] = ""
    with pytest.raises(errors.InvalidArgumentError, match="key of row 9 is empty"):
        embstore.save(a, tmp_path / "d.emb", keys=empty)
    with pytest.raises(errors.InvalidArgumentError, match="2 keys for 3000 rows"):
        embstore.save(a, tmp_path / "d.emb", keys=["a", "b"])
    with pytest.raises(errors.InvalidArgumentError, match="key 7 of row 0 is a int"):
        embstore.save(a[:1], tmp_path / "d.emb", keys=[7])
    assert leftovers(tmp_path) == ["k.emb"]


def test_an_existing_table_is_replaced_only_with_force(tmp_path):
    dest = tmp_path / "t.emb"
    embstore.save(rng_matrix(10, 4, 1), dest)
    before = dest.read_bytes()
    with pytest.raises(errors.AlreadyExistsError, match="force=True"):
        embstore.save(rng_matrix(10, 4, 2), dest)
    assert dest.read_bytes() == before
    embstore.save(rng_matrix(10, 4, 2), dest, force=True)
    assert np.array_equal(embstore.load(dest), rng_matrix(10, 4, 2))
    assert leftovers(tmp_path) == ["t.emb"]


def test_bad_arrays_get_clear_errors(tmp_path):
    a = rng_matrix(50, 6, 1)
    cases = [
        (a.T, "not C-contiguous"),
        (a[:, ::2], "not C-contiguous"),
        (a[0], r"shape \(6,\); a table is a 2-D matrix"),
        (a.reshape(5, 10, 6), "2-D matrix"),
        (np.zeros((3, 0), np.float32), "dim must be at least 1"),
        (a.astype(np.int32), "dtype int32"),
        ([[1.0, 2.0]], "cannot save a builtins.list"),
    ]
    for bad, message in cases:
        with pytest.raises(errors.InvalidArgumentError, match=message):
            embstore.save(bad, tmp_path / "t.emb")
    with pytest.raises(errors.InvalidArgumentError, match="dtype='f64' is not a table dtype"):
        embstore.save(a, tmp_path / "t.emb", dtype="f64")
    with pytest.raises(errors.InvalidArgumentError, match="reserved"):
        embstore.save(a, tmp_path / "t.emb", metadata={"embstore.version": "9"})
    with pytest.raises(errors.NotFoundError):
        embstore.save(a, tmp_path / "no" / "such" / "t.emb")
    assert leftovers(tmp_path) == []
    # An empty matrix is a valid table.
    embstore.save(np.zeros((0, 6), np.float32), tmp_path / "e.emb")
    assert embstore.load(tmp_path / "e.emb").shape == (0, 6)


def test_metadata_and_progress(tmp_path):
    calls = []
    embstore.save(rng_matrix(1000, 4), tmp_path / "t.emb", metadata={"model": "two-tower"},
                  chunk_rows=300, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(300, 1000), (600, 1000), (900, 1000), (1000, 1000)]
    assert embstore.Source.resolve(str(tmp_path / "t.emb")).describe()["metadata"]["model"] == \
        "two-tower"
    with pytest.raises(errors.CancelledError):
        embstore.save(rng_matrix(1000, 4), tmp_path / "c.emb", chunk_rows=300,
                      progress=lambda done, total: done < 600)
    assert leftovers(tmp_path) == ["t.emb"]


def test_prefetched_reads_write_the_same_table_and_fail_cleanly(tmp_path):
    # The TensorFlow writer reads the next chunk on a second thread (Rows.prefetch): the chunks
    # still arrive in order, and a read that fails mid-way fails the save with its own error,
    # nothing left behind and no read started after it.
    from embstore._save import Rows, write_rows
    a = rng_matrix(10_000, 8, seed=5)
    reads = []

    def read(b, e):
        reads.append(b)
        if fail_at is not None and b >= fail_at:
            raise ValueError(f"read of row {b} failed")
        return a[b:e].copy()
    fail_at = None
    write_rows(Rows(len(a), 8, "f32", read, "the test matrix", prefetch=True),
               tmp_path / "t.emb", chunk_rows=999)
    assert np.array_equal(embstore.load(tmp_path / "t.emb"), a)
    assert reads == list(range(0, 10_000, 999))
    reads.clear()
    fail_at = 5 * 999
    with pytest.raises(ValueError, match="read of row 4995 failed"):
        write_rows(Rows(len(a), 8, "f32", read, "the test matrix", prefetch=True),
                   tmp_path / "f.emb", chunk_rows=999)
    assert reads == list(range(0, 6 * 999, 999))
    assert leftovers(tmp_path) == ["t.emb"]


def test_torch_tensors_and_modules(tmp_path):
    torch = pytest.importorskip("torch")
    import embstore.torch as et
    emb = torch.nn.Embedding(2000, 20)
    # A few steps of plain SGD by hand: the weight requires grad. Not torch.optim, whose
    # first use imports triton, and triton's bundled LLVM aborts a process that has
    # already loaded TensorFlow's ("Option ... registered more than once"), as this
    # pytest process has.
    for step in range(3):
        emb(torch.randint(0, 2000, (64,))).pow(2).sum().backward()
        with torch.no_grad():
            emb.weight -= 0.01 * emb.weight.grad
        emb.weight.grad = None
    et.save(emb, tmp_path / "m.emb", chunk_rows=333)
    assert torch.equal(torch.from_numpy(embstore.load(tmp_path / "m.emb")), emb.weight.detach())
    back = torch.nn.Embedding(2000, 20)
    et.load_into(back.weight.data, str(tmp_path / "m.emb"))
    assert torch.equal(back.weight, emb.weight)
    for dtype in (torch.bfloat16, torch.float16):
        w = emb.weight.detach().to(dtype)
        embstore.save(w, tmp_path / f"{dtype}.emb")
        got = torch.from_numpy(embstore.load(tmp_path / f"{dtype}.emb", dtype="native")
                               .view(np.int16)).view(dtype)
        assert torch.equal(got, w), dtype
    # torch dtypes as dtype=; float64 tensors narrow correctly.
    d = torch.from_numpy(rng_matrix(100, 8, 3, np.float64))
    et.save(d, tmp_path / "d.emb", dtype=torch.float16)
    assert np.array_equal(embstore.load(tmp_path / "d.emb", dtype="native"),
                          d.numpy().astype(np.float16))
    with pytest.raises(errors.InvalidArgumentError, match="not contiguous"):
        et.save(emb.weight.t(), tmp_path / "x.emb")
    with pytest.raises(errors.InvalidArgumentError, match="2 2-D parameters"):
        et.save(torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 5)),
                tmp_path / "x.emb")
    with pytest.raises(errors.InvalidArgumentError, match="NAME.shards.json"):
        from torch.distributed.tensor import DTensor  # noqa: F401
        et._shard_paths(tmp_path / "x.emb")
    assert not (tmp_path / "x.emb").exists()


def test_convert_from_python_has_the_clis_options_and_errors(tmp_path):
    vec = tmp_path / "w.vec"
    vec.write_text("3 2\nthe 0.5 1.5\nof -1 2\nand 3 4\n")
    s = embstore.convert(vec, tmp_path / "w.emb")
    assert s["format"] == "word2vec" and s["rows"] == 3 and s["dim"] == 2
    assert np.array_equal(embstore.load(tmp_path / "w.emb", keys=["of"]), [[-1, 2]])
    bad = tmp_path / "bad.txt"
    bad.write_text("1 2 3\n4 5 x\n")
    with pytest.raises(errors.CorruptionError, match=r"bad.txt:2:5"):
        embstore.convert(bad, tmp_path / "b.emb")
    with pytest.raises(errors.AlreadyExistsError, match="force=True"):
        embstore.convert(vec, tmp_path / "w.emb")
    csv = tmp_path / "m.csv"
    csv.write_text("# header\n1,2\n3,4\n")
    s = embstore.convert(csv, tmp_path / "c.emb", delimiter=",", dtype="f16",
                         metadata={"k": "v"})
    assert s["dtype"] == "F16" and np.array_equal(embstore.load(tmp_path / "c.emb"),
                                                  [[1, 2], [3, 4]])
    with pytest.raises(errors.InvalidArgumentError, match="delimiter"):
        embstore.convert(csv, tmp_path / "d.emb", delimiter="1")
    with pytest.raises(errors.InvalidArgumentError, match="on_duplicate_key"):
        embstore.convert(vec, tmp_path / "d.emb", on_duplicate_key="maybe")
    assert sorted(leftovers(tmp_path)) == ["bad.txt", "c.emb", "m.csv", "w.emb", "w.vec"]


def test_save_into_a_full_disk(small_disk):
    a = rng_matrix(50_000, 128)  # 25.6 MB on a 20 MB disk
    with pytest.raises(errors.EmbstoreError, match="No space left on device") as e:
        embstore.save(a, small_disk / "t.emb")
    assert str(small_disk) in str(e.value)
    assert os.listdir(small_disk) == []
    st = os.statvfs(small_disk)
    assert st.f_bfree == st.f_blocks


SAVER = textwrap.dedent("""
    import sys, numpy as np, embstore
    a = np.ones((400_000, 128), np.float32)  # 205 MB, 16 MiB chunks
    def progress(done, total):
        if done >= 100_000:
            print("SAVING", flush=True)
            sys.stdin.readline()  # the test signals this process now
        return True
    embstore.save(a, sys.argv[1], progress=progress, durable=False)
    print("DONE", flush=True)
""")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_a_signal_mid_save_publishes_nothing(tmp_path, sig):
    dest = tmp_path / "out" / "t.emb"
    dest.parent.mkdir()
    p = subprocess.Popen([sys.executable, "-c", SAVER, str(dest)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=as_from_a_terminal)
    assert p.stdout.readline().strip() == "SAVING"
    p.send_signal(sig)
    out, err = p.communicate(timeout=60)
    assert "DONE" not in out
    assert not dest.exists()
    left = os.listdir(dest.parent)
    if sig == signal.SIGINT:
        assert "KeyboardInterrupt" in err and left == [], (err, left)
    else:  # nothing can run on SIGKILL: what is left is the hidden temporary, never the table
        assert all(n.startswith(".t.emb.tmp-") for n in left), left
