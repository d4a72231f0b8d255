"""embstore.torch with a real PyTorch: embeddings, in-place loads and zero-copy mapping."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import embstore  # noqa: E402
import embstore.torch  # noqa: E402
from conftest import expected_matrix, wait_for_table, write_table  # noqa: E402

ROWS, DIM = 500, 12


@pytest.fixture
def table(make_table_bin, tmp_path):
    return str(write_table(make_table_bin, tmp_path / "words.emb", ROWS, DIM, keys=True))


def test_embedding_module(table):
    emb = embstore.torch.embedding(table)
    assert isinstance(emb, torch.nn.Embedding)
    assert not emb.weight.requires_grad
    np.testing.assert_array_equal(emb.weight.numpy(), expected_matrix(ROWS, DIM))
    out = emb(torch.tensor([3, 499]))
    np.testing.assert_array_equal(out.numpy(), expected_matrix(ROWS, DIM)[[3, 499]])
    trainable = embstore.torch.embedding(table, freeze=False, rows=(100, 200))
    assert trainable.weight.requires_grad and trainable.weight.shape == (100, DIM)


def test_load_into_existing_tensors(table, make_table_bin, tmp_path):
    w = torch.zeros(ROWS, DIM)
    assert embstore.torch.load_into(w, table) is w
    np.testing.assert_array_equal(w.numpy(), expected_matrix(ROWS, DIM))

    bf = write_table(make_table_bin, tmp_path / "bf.emb", 64, 8, dtype="bf16")
    native = torch.zeros(64, 8, dtype=torch.bfloat16)
    embstore.torch.load_into(native, str(bf))
    np.testing.assert_array_equal(native.float().numpy(), expected_matrix(64, 8))

    # A non-contiguous destination goes through the staging path.
    wide = torch.zeros(ROWS, 2 * DIM)
    embstore.torch.load_into(wide[:, ::2], table, chunk_rows=64)
    np.testing.assert_array_equal(wide[:, ::2].numpy(), expected_matrix(ROWS, DIM))


def test_load_into_rejects_mismatches(table):
    with pytest.raises(embstore.errors.InvalidArgumentError, match=r"\[10, 12\]"):
        embstore.torch.load_into(torch.zeros(10, DIM), table)
    with pytest.raises(embstore.errors.InvalidArgumentError, match="float64"):
        embstore.torch.load_into(torch.zeros(ROWS, DIM, dtype=torch.float64), table)


def test_from_file_is_zero_copy_and_copy_on_write(table):
    before = open(table, "rb").read()
    w = embstore.torch.from_file(table)
    assert w.shape == (ROWS, DIM) and w.dtype == torch.float32
    np.testing.assert_array_equal(w.numpy(), expected_matrix(ROWS, DIM))
    w[0, 0] = 1234.0  # private pages: the file does not change
    assert open(table, "rb").read() == before
    assert embstore.load(table)[0, 0] == expected_matrix(ROWS, DIM)[0, 0]


def test_from_a_server(make_table_bin, server):
    write_table(make_table_bin, server.store / "words.emb", ROWS, DIM)
    wait_for_table(server.unix, "words")
    emb = embstore.torch.embedding(server.unix, "words", local=False)
    np.testing.assert_array_equal(emb.weight.numpy(), expected_matrix(ROWS, DIM))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tensor(table):
    w = torch.zeros(ROWS, DIM, device="cuda")
    embstore.torch.load_into(w, table, chunk_rows=100)
    np.testing.assert_array_equal(w.cpu().numpy(), expected_matrix(ROWS, DIM))
