"""`embstore convert` on files as people have them: a byte order mark in front, vocabularies whose
first tokens are numbers, and files that are not text embeddings at all. At the sizes where
format sniffing and chunking meet real data (tens of MB), checked against the arrays written."""
import numpy as np
import pytest

from conftest import run
from spec_reader import read_table

BOM = b"\xef\xbb\xbf"


def convert(embstore_bin, src, dst, *args):
    return run([embstore_bin, "convert", src, dst, *args])


def matrix_text(m, delimiter=" ", newline="\n"):
    """np.savetxt's text of a float32 matrix, '%.9g' (which reads back exactly)."""
    import io
    buf = io.StringIO()
    np.savetxt(buf, m, fmt="%.9g", delimiter=delimiter, newline=newline)
    return buf.getvalue().encode()


def word_rows(tokens, m):
    """'token v1 ... vd' lines (GloVe's layout) for `tokens` and the rows of `m` ('%.9g')."""
    # Rows repeat with a period of 997 so that a file of 200,000 rows is quick to make.
    period = min(997, len(m))
    texts = [" ".join(f"{v:.9g}" for v in row) for row in m[:period]]
    return "".join(f"{t} {texts[i % period]}\n" for i, t in enumerate(tokens)).encode()


def tiled(m, n):
    period = min(997, len(m))
    return m[np.arange(n) % period]


@pytest.fixture(scope="module")
def matrix_50k():
    rng = np.random.default_rng(26)
    return (rng.standard_normal((50_000, 100)) * 3).astype(np.float32)


def test_bom_before_a_savetxt_matrix_is_skipped_not_made_a_key(embstore_bin, tmp_path,
                                                                 matrix_50k):
    # Once: converted with exit 0 into 50000 x 99 "from glove", the first column made keys.
    src = tmp_path / "m.txt"
    src.write_bytes(BOM + matrix_text(matrix_50k))
    out = convert(embstore_bin, src, tmp_path / "m.emb")
    assert out.returncode == 0, out.stderr
    assert "skipped the UTF-8 byte order mark" in out.stderr
    assert "50000 rows x 100 F32" in out.stdout and "from matrix" in out.stdout
    m, keys, _ = read_table(tmp_path / "m.emb")
    assert keys is None
    np.testing.assert_array_equal(m, matrix_50k)


def test_bom_before_a_crlf_comma_matrix(embstore_bin, tmp_path, matrix_50k):
    src = tmp_path / "m.csv"
    src.write_bytes(BOM + matrix_text(matrix_50k[:20_000], delimiter=",", newline="\r\n"))
    out = convert(embstore_bin, src, tmp_path / "m.emb")
    assert out.returncode == 0, out.stderr
    np.testing.assert_array_equal(read_table(tmp_path / "m.emb")[0], matrix_50k[:20_000])


def test_bom_before_a_tiny_matrix_and_before_word_files(embstore_bin, tmp_path, matrix_50k):
    src = tmp_path / "t.txt"
    src.write_bytes(BOM + b"1 2\n3 4\n")
    assert convert(embstore_bin, src, tmp_path / "t.emb").returncode == 0
    m, keys, _ = read_table(tmp_path / "t.emb")
    assert keys is None and m.tolist() == [[1, 2], [3, 4]]

    tokens = ["the", "of", "naïve"] + [f"w{i}" for i in range(30_000)]
    vecs = matrix_50k[:, :50]
    for name, head in (("g.txt", b""), ("w.vec", f"{len(tokens)} 50\n".encode())):
        src = tmp_path / name
        src.write_bytes(BOM + head + word_rows(tokens, vecs))
        out = convert(embstore_bin, src, tmp_path / (name + ".emb"))
        assert out.returncode == 0, out.stderr
        m, keys, _ = read_table(tmp_path / (name + ".emb"))
        assert keys[:3] == ["the", "of", "naïve"], keys[:3]
        np.testing.assert_array_equal(m, tiled(vecs, len(tokens)))


def test_bom_inside_the_text_is_shown_and_named(embstore_bin, tmp_path):
    src = tmp_path / "cat.txt"
    src.write_bytes(b"1 2\n3 4\n" + BOM + b"5 6\n")
    out = convert(embstore_bin, src, tmp_path / "cat.emb")
    assert out.returncode == 1
    assert "cat.txt:3:1: '\\ufeff5' is not a number" in out.stderr, out.stderr
    assert "holds U+FEFF BYTE ORDER MARK" in out.stderr


def test_glove_whose_first_token_is_a_number(embstore_bin, tmp_path, matrix_50k):
    # Once: sniffed as a matrix, then "'naïve' is not a number" at 2:1.
    tokens = ["2010", "naïve", "the"] + [f"w{i}" for i in range(200_000 - 3)]
    vecs = matrix_50k[:, :50]
    src = tmp_path / "glove.txt"
    src.write_bytes(word_rows(tokens, vecs))
    out = convert(embstore_bin, src, tmp_path / "g.emb")
    assert out.returncode == 0, out.stderr
    assert "detected glove" in out.stderr and "line 1's token is a number" in out.stderr
    m, keys, _ = read_table(tmp_path / "g.emb")
    assert keys[:3] == ["2010", "naïve", "the"] and len(keys) == 200_000
    np.testing.assert_array_equal(m, tiled(vecs, 200_000))


def test_word2vec_whose_first_token_is_a_number(embstore_bin, tmp_path, matrix_50k):
    # Once: "row has 101 values, expected 2 (from the first row, line 1)": the header was
    # taken for a matrix row.
    tokens = ["2010", "1", "000"] + [f"w{i}" for i in range(200_000 - 3)]
    src = tmp_path / "w.vec"
    src.write_bytes(b"200000 100\n" + word_rows(tokens, matrix_50k))
    out = convert(embstore_bin, src, tmp_path / "w.emb")
    assert out.returncode == 0, out.stderr
    assert "detected word2vec: line 1 '200000 100' is a word2vec header" in out.stderr
    m, keys, _ = read_table(tmp_path / "w.emb")
    assert keys[:3] == ["2010", "1", "000"] and m.shape == (200_000, 100)
    np.testing.assert_array_equal(m, tiled(matrix_50k, 200_000))


def test_vocabulary_sorted_by_token_names_the_guess_and_the_way_out(embstore_bin, tmp_path,
                                                                    matrix_50k):
    # More numeric tokens than the sniffer reads: it cannot tell, so it says what it guessed.
    tokens = [str(i) for i in range(5000)] + ["apple", "naïve"] + [f"w{i}" for i in range(20_000)]
    vecs = matrix_50k[:, :20]
    src = tmp_path / "sorted.txt"
    src.write_bytes(word_rows(tokens, vecs))
    out = convert(embstore_bin, src, tmp_path / "s.emb")
    assert out.returncode == 1
    assert "sorted.txt:5001:1: 'apple' is not a number" in out.stderr, out.stderr
    assert "detected matrix: lines of numbers (the first 1001 lines)" in out.stderr
    assert "use --format" in out.stderr
    out = convert(embstore_bin, src, tmp_path / "s.emb", "--format", "glove")
    assert out.returncode == 0, out.stderr
    assert read_table(tmp_path / "s.emb")[1][5000:5002] == ["apple", "naïve"]


def test_matrix_with_a_stray_word_stays_a_matrix(embstore_bin, tmp_path, matrix_50k):
    # A word in the first column of one line is a broken matrix, never GloVe with the first
    # column made into keys.
    text = matrix_text(matrix_50k[:5000]).split(b"\n")
    text[300] = b"oops" + text[300][text[300].index(b" "):]
    src = tmp_path / "m.txt"
    src.write_bytes(b"\n".join(text))
    out = convert(embstore_bin, src, tmp_path / "m.emb")
    assert out.returncode == 1
    assert "m.txt:301:1: 'oops' is not a number" in out.stderr, out.stderr
    assert "detected matrix" in out.stderr


def test_header_of_dim_1_over_a_two_column_matrix_is_a_matrix(embstore_bin, tmp_path):
    src = tmp_path / "two.txt"
    src.write_bytes(b"5 1\n3 4\n6 7\n")
    out = convert(embstore_bin, src, tmp_path / "two.emb")
    assert out.returncode == 0, out.stderr
    m, keys, _ = read_table(tmp_path / "two.emb")
    assert keys is None and m.tolist() == [[5, 1], [3, 4], [6, 7]]


@pytest.mark.parametrize("head,what", [
    (b"\xba\x16\x4f\x2f\x0c\x00\x00\x00" + bytes(range(256)) * 8, "a fastText model (.bin)"),
    (b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }",
     "a NumPy .npy file"),
    (b"PK\x03\x04" + b"\x00" * 60, "a zip archive"),
    (b"\x80\x04\x95" + b"\x00" * 60, "a Python pickle"),
    (b"\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":1}        ", "a safetensors file"),
])
def test_files_that_are_not_text_are_named(embstore_bin, tmp_path, head, what):
    src = tmp_path / "model.bin"
    src.write_bytes(head)
    out = convert(embstore_bin, src, tmp_path / "x.emb")
    assert out.returncode == 1
    assert f"model.bin is {what}" in out.stderr, out.stderr
    assert "is not a number" not in out.stderr
