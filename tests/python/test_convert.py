"""`embstore convert`: numpy loadtxt compatibility, word-vector formats, exact rounding, bad input.

Every matrix case is checked against real np.loadtxt on the same file. Tables are read back with
spec_reader (written from docs/FORMAT.md alone).
"""
import gzip
import os
import random
import struct
import subprocess
import zlib
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from conftest import run
from spec_reader import read_table


def convert(embstore_bin, src, dst, *args, stdin=None):
    return run([embstore_bin, "convert", src, dst, *args], input=stdin)


def write(path, content):
    mode = "wb" if isinstance(content, bytes) else "w"
    kw = {} if isinstance(content, bytes) else {"newline": ""}
    with open(path, mode, **kw) as f:
        f.write(content)
    return path


def leftovers(directory):
    """Table files and temporaries in a directory (a failed run must leave none)."""
    return sorted(n for n in os.listdir(directory) if ".emb" in n or ".tmp" in n)


# --- np.loadtxt compatibility ---------------------------------------------------------------------

# (text, convert args, np.loadtxt kwargs): numpy reads each of these; so must we, identically.
ACCEPTED = [
    ("1 2 3\n4 5 6\n", [], {}),
    ("1\t2  3\n  4 \t 5 6   \n", [], {}),
    ("# header\n1 2\n\n# mid\n3 4 # trailing\n5 6#tight\n", [], {}),
    ("1 2\r\n3 4\r\n", [], {}),
    ("1 2\n3 4", [], {}),                                            # no final newline
    ("1,2,3\n 4 , 5 ,6\n", ["--delimiter", ","], {"delimiter": ","}),
    ("1;2\n3;4\n", ["--delimiter", ";"], {"delimiter": ";"}),
    ("1\t2\n3\t4\n", ["--delimiter", "\\t"], {"delimiter": "\t"}),
    ("a b\n# c\n1 2\n3 4\n", ["--skip-rows", "2"], {"skiprows": 2}),  # skiprows counts comments
    ("// c\n1 2 // x\n3 4\n", ["--comments", "//"], {"comments": "//"}),
    ("+1 -2 .5 5. 1e5 1E+05 1e005 -.5e-3 007\n", [], {}),
    ("inf -inf +inf INF Infinity -INFINITY nan NaN -nan +NAN\n", [], {}),
    ("0.1 0.2 0.3 1e-45 1e-46 3.4028235e38 -0\n", [], {}),
    (" ".join(["1." + "3" * 150, "2" * 120 + "e-100", "0." + "0" * 80 + "17", "9" * 30]) + "\n",
     [], {}),
]


@pytest.mark.parametrize("text,args,kw", ACCEPTED)
def test_matches_np_loadtxt(embstore_bin, tmp_path, text, args, kw):
    src = write(tmp_path / "in.txt", text)
    expected = np.loadtxt(src, dtype=np.float32, ndmin=2, **kw)
    out = convert(embstore_bin, src, tmp_path / "out.emb", "--format", "matrix", *args)
    assert out.returncode == 0, out.stderr
    matrix, keys, _ = read_table(tmp_path / "out.emb")
    assert keys is None
    assert matrix.shape == expected.shape
    np.testing.assert_array_equal(matrix.view(np.uint32)[~np.isnan(matrix)],
                                  expected.view(np.uint32)[~np.isnan(expected)])
    assert np.array_equal(np.isnan(matrix), np.isnan(expected))
    assert np.array_equal(np.signbit(matrix), np.signbit(expected))


def test_cr_only_line_breaks(embstore_bin, tmp_path):
    # np.loadtxt reads a file path with universal newlines, so old Mac files load; so do we.
    src = write(tmp_path / "cr.txt", "1 2\r3 4\r")
    expected = np.loadtxt(src, dtype=np.float32)
    out = convert(embstore_bin, src, tmp_path / "out.emb")
    assert out.returncode == 0, out.stderr
    np.testing.assert_array_equal(read_table(tmp_path / "out.emb")[0], expected)


# (token, expected column in the message): numpy rejects each of these, and so must we.
REJECTED_TOKENS = ["0x1p3", "1_000", "1.5d0", ".", "nan(123)", "1e", "inf1", "1e5.5", "--1",
                   "1.2.3", "\u0661", "e5"]


@pytest.mark.parametrize("token", REJECTED_TOKENS)
def test_rejects_what_np_loadtxt_rejects(embstore_bin, tmp_path, token):
    src = write(tmp_path / "bad.txt", f"1 2\n3 {token}\n")
    with pytest.raises(ValueError):
        np.loadtxt(src, dtype=np.float32)
    out = convert(embstore_bin, src, tmp_path / "out.emb", "--format", "matrix")
    assert out.returncode == 1
    assert f"bad.txt:2:3: '{token}' is not a number" in out.stderr
    assert leftovers(tmp_path) == []


def test_ragged_rows_are_rejected_like_np_loadtxt(embstore_bin, tmp_path):
    src = write(tmp_path / "r.txt", "1 2 3\n4 5 6\n7 8\n")
    with pytest.raises(ValueError):
        np.loadtxt(src, dtype=np.float32)
    out = convert(embstore_bin, src, tmp_path / "out.emb")
    assert out.returncode == 1
    assert "r.txt:3:4: row has 2 values, expected 3" in out.stderr and "'7 8'" in out.stderr
    src = write(tmp_path / "r2.txt", "1 2\n3 4 5 6\n")
    out = convert(embstore_bin, src, tmp_path / "out.emb")
    assert out.returncode == 1
    assert "r2.txt:2:5: row has 4 values, expected 2" in out.stderr
    assert leftovers(tmp_path) == []


def test_empty_fields_are_rejected_like_np_loadtxt(embstore_bin, tmp_path):
    src = write(tmp_path / "e.csv", "1,2,\n")
    with pytest.raises(ValueError):
        np.loadtxt(src, dtype=np.float32, delimiter=",")
    out = convert(embstore_bin, src, tmp_path / "out.emb", "--delimiter", ",")
    assert out.returncode == 1 and "e.csv:1:5: empty field" in out.stderr


def test_numpy_double_rounds_where_we_do_not(embstore_bin, tmp_path):
    # Just above the midpoint between 1 and the next float32: the nearest double is the midpoint
    # itself, which numpy's double->float32 cast rounds to even (1.0). The correct answer is up.
    mid = Fraction(1) + Fraction(1, 2**24)
    text = decimal_of(mid) + "0" * 30 + "1"
    src = write(tmp_path / "h.txt", text + "\n")
    numpy_value = np.loadtxt(src, dtype=np.float32, ndmin=1)[0]
    assert numpy_value == np.float32(1.0)
    out = convert(embstore_bin, src, tmp_path / "out.emb")
    assert out.returncode == 0, out.stderr
    ours = read_table(tmp_path / "out.emb")[0][0, 0]
    assert ours == np.nextafter(np.float32(1), np.float32(2))


# --- exact rounding -------------------------------------------------------------------------------

def decimal_of(fr):
    """Exact decimal expansion of a dyadic Fraction."""
    sign = "-" if fr < 0 else ""
    fr = abs(fr)
    k = 0
    while (fr * 10**k).denominator != 1:
        k += 1
    digits = str((fr * 10**k).numerator).rjust(k + 1, "0")
    return sign + (digits[:-k] + "." + digits[-k:] if k else digits)


TYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}


def exact_round(text, np_type):
    """Correctly rounded `text` in np_type (ties to even), from exact rational arithmetic."""
    with np.errstate(over="ignore"):
        return _exact_round(Fraction(text), np_type)


def _exact_round(x, np_type):
    finfo = ml_dtypes.finfo(np_type)
    big = Fraction(float(finfo.max))
    ulp_max = big - Fraction(float(np.nextafter(np_type(finfo.max), np_type(0))))
    if abs(x) >= big + ulp_max / 2:  # the midpoint to the next power of two ties to infinity
        return np_type(np.inf) if x > 0 else np_type(-np.inf)
    c = np_type(float(x))
    best = None
    for cand in (np.nextafter(c, np_type(-np.inf)), c, np.nextafter(c, np_type(np.inf))):
        if not np.isfinite(cand):
            continue
        d = abs(Fraction(float(cand)) - x)
        even = int(np.array(cand).view(np.uint16 if np.dtype(np_type).itemsize == 2
                                       else np.uint32)) % 2 == 0
        key = (d, not even)
        if best is None or key < best[0]:
            best = (key, cand)
    return best[1]


def hard_cases(np_type, rng, n):
    """Midpoints between neighbours, a hair above and below, subnormals, overflow boundaries."""
    it = np.dtype(np_type).itemsize
    utype = np.uint16 if it == 2 else np.uint32
    finfo = ml_dtypes.finfo(np_type)
    max_bits = int(np.array(np_type(finfo.max)).view(utype))
    cases = []
    for _ in range(n):
        bits = rng.randrange(0, max_bits)
        if rng.random() < 0.3:
            bits = rng.randrange(0, 64)  # subnormals
        a = np.array(bits, dtype=utype).view(np_type)
        b = np.array(bits + 1, dtype=utype).view(np_type)
        mid = (Fraction(float(a)) + Fraction(float(b))) / 2
        exact = decimal_of(mid)
        if "." not in exact:
            exact += "."
        cases += [exact, exact + "0" * 25 + "1"]
        # A hair below: subtract 10^-(digits+20).
        below = mid - Fraction(1, 10 ** (len(exact) + 20))
        cases.append(decimal_of_approx(below, len(exact) + 25))
    top = Fraction(float(finfo.max))
    half_ulp = (top - Fraction(float(np.nextafter(np_type(finfo.max), np_type(0))))) / 2
    cases += [decimal_of(top), decimal_of(top + half_ulp),
              decimal_of(top + half_ulp) + "0" * 20 + "1",
              decimal_of_approx(top + half_ulp - Fraction(1, 10**30), 80)]
    return cases


def decimal_of_approx(fr, digits):
    """`fr` rounded down to `digits` decimals (for values just below a midpoint)."""
    q = fr * 10**digits
    n = q.numerator // q.denominator
    s = str(n).rjust(digits + 1, "0")
    return s[:-digits] + "." + s[-digits:]


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_hard_rounding_cases_are_correctly_rounded(embstore_bin, tmp_path, dtype):
    rng = random.Random(17)
    np_type = TYPES[dtype]
    cases = hard_cases(np_type, rng, 150)
    cases += ["1." + "".join(rng.choice("0123456789") for _ in range(150)) for _ in range(20)]
    cases += ["-" + c for c in cases[:40]]
    src = write(tmp_path / "h.txt", "\n".join(cases) + "\n")
    out = convert(embstore_bin, src, tmp_path / "out.emb", "--dtype", dtype, "--format",
                  "matrix", "--on-overflow", "inf")
    assert out.returncode == 0, out.stderr
    matrix = read_table(tmp_path / "out.emb")[0].reshape(-1)
    utype = np.uint16 if np.dtype(np_type).itemsize == 2 else np.uint32
    ours = np.asarray(matrix).view(np.uint16) if dtype == "f16" else None
    for i, text in enumerate(cases):
        want = exact_round(text, np_type)
        if dtype == "f16":
            got_bits = int(ours[i])
        elif dtype == "bf16":
            got_bits = int(np.array(matrix[i], dtype=np.float32).view(np.uint32)) >> 16
        else:
            got_bits = int(np.array(matrix[i]).view(np.uint32))
        want_bits = int(np.array(want).view(utype))
        assert got_bits == want_bits, f"{text}: got {got_bits:#x}, want {want_bits:#x}"


def test_f16_overflow_is_an_error_unless_inf_is_asked_for(embstore_bin, tmp_path):
    src = write(tmp_path / "o.txt", "1 65504\n2 65520\n")
    out = convert(embstore_bin, src, tmp_path / "out.emb", "--dtype", "f16")
    assert out.returncode == 1
    assert "o.txt:2:3: '65520' is out of range for F16" in out.stderr
    # The library names its option (`on_overflow`); the CLI says which flag sets it.
    assert "(--on-overflow inf stores it as infinity)" in out.stderr
    assert leftovers(tmp_path) == []
    out = convert(embstore_bin, src, tmp_path / "out.emb", "--dtype", "f16", "--on-overflow", "inf")
    assert out.returncode == 0, out.stderr
    m = read_table(tmp_path / "out.emb")[0]
    assert m[0, 1] == 65504 and np.isinf(m[1, 1])
    out = convert(embstore_bin, write(tmp_path / "o32.txt", "1e39\n"), tmp_path / "o32.emb")
    assert out.returncode == 1 and "out of range for F32" in out.stderr


# --- randomized round trips -----------------------------------------------------------------------

def random_matrix(rng, rows, dim):
    return (rng.standard_normal((rows, dim)) * 10.0 ** rng.integers(-3, 4, (rows, 1))).astype(
        np.float32)


def write_format(path, fmt, matrix, keys, value_fmt, rng):
    lines = []
    if fmt == "word2vec":
        lines.append(f"{matrix.shape[0]} {matrix.shape[1]}")
    for i, row in enumerate(matrix):
        values = " ".join(value_fmt % float(v) for v in row)
        if fmt == "matrix":
            lines.append(values)
        else:
            lines.append(f"{keys[i]} {values}" + (" " if rng.random() < 0.5 else ""))
    text = "\n".join(lines) + "\n"
    if fmt == "word2vec-binary":
        data = f"{matrix.shape[0]} {matrix.shape[1]}\n".encode()
        for i, row in enumerate(matrix):
            data += keys[i].encode() + b" " + row.astype("<f4").tobytes() + b"\n"
        return write(path, data)
    return write(path, text)


@pytest.mark.parametrize("fmt", ["matrix", "word2vec", "glove", "word2vec-binary"])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_random_round_trips(embstore_bin, tmp_path, fmt, dtype):
    rng = np.random.default_rng(zlib.crc32(f"{fmt}-{dtype}".encode()))
    rows, dim = 700, 13
    matrix = random_matrix(rng, rows, dim)
    keys = [f"w{i}_\u00e9{rng.integers(1000)}" for i in range(rows)]
    value_fmt = "%.18e" if dtype == "f32" else "%.8g"
    src = write_format(tmp_path / "in.txt", fmt, matrix, keys, value_fmt, random.Random(1))
    if rng.random() < 0.5 and fmt != "word2vec-binary":
        with open(src, "rb") as f:
            data = f.read()
        src = write(tmp_path / "in.txt.gz", gzip.compress(data))
    np_type = TYPES[dtype]
    if fmt == "word2vec-binary":
        expected = matrix.astype(np_type)
    else:
        # %.8g decimals: exact round-to-nearest of their double (no halfway doubles here).
        decimals = np.array([[float(value_fmt % float(v)) for v in row] for row in matrix])
        expected = decimals.astype(np_type)
    results = []
    for threads in ["1", "2", "3"]:
        dst = tmp_path / f"out{threads}.emb"
        out = convert(embstore_bin, src, dst, "--dtype", dtype, "--threads", threads)
        assert out.returncode == 0, out.stderr
        got, got_keys, meta = read_table(dst)
        assert got.shape == (rows, dim)
        if fmt == "matrix":
            assert got_keys is None
        else:
            assert got_keys == keys
        results.append(np.asarray(got).tobytes())
        np.testing.assert_array_equal(np.asarray(got, dtype=np.float32),
                                      expected.astype(np.float32))
    assert results[0] == results[1] == results[2]  # identical for any --threads


def test_stdin_and_auto_detection_message(embstore_bin, tmp_path):
    out = convert(embstore_bin, "-", tmp_path / "out.emb", stdin="2 3\nthe 1 2 3\nof 4 5 6\n")
    assert out.returncode == 0, out.stderr
    assert "detected word2vec" in out.stderr
    assert "2 rows x 3 F32" in out.stdout and "word2vec" in out.stdout
    matrix, keys, meta = read_table(tmp_path / "out.emb")
    assert keys == ["the", "of"] and meta["embstore.source.name"] == "-"


def test_glove_and_binary_are_detected(embstore_bin, tmp_path):
    out = convert(embstore_bin, write(tmp_path / "g.txt", "the 1 2\nof 3 4\n"),
                  tmp_path / "g.emb")
    assert out.returncode == 0 and "detected glove" in out.stderr
    data = b"1 2\nhi " + struct.pack("<2f", 0.5, -1.0) + b"\n"
    out = convert(embstore_bin, write(tmp_path / "b.bin", data), tmp_path / "b.emb")
    assert out.returncode == 0, out.stderr
    assert "detected word2vec-binary" in out.stderr
    assert read_table(tmp_path / "b.emb")[1] == ["hi"]


def test_gzip_stdin(embstore_bin, tmp_path):
    data = gzip.compress(b"1 2\n3 4\n")
    proc = subprocess.run([str(embstore_bin), "convert", "-", str(tmp_path / "o.emb")],
                          input=data, capture_output=True)
    assert proc.returncode == 0, proc.stderr
    assert "(gzip)" in proc.stdout.decode()
    np.testing.assert_array_equal(read_table(tmp_path / "o.emb")[0], [[1, 2], [3, 4]])


# --- bad input ------------------------------------------------------------------------------------

BAD = [
    ("3 2\na 1 2\nb 3 4\n", "says 3 rows, found 2"),
    ("2 3\na 1 2 3\nb 3 4\n",
     "h.txt:3:6: row has 2 values, expected 3 (from the header on line 1)"),
    ("a 1 2\nb 3 4\na 5 6\n", "h.txt:3:1: duplicate key 'a' (first on line 1"),
    ("", "no data rows"),
    ("# only comments\n\n", "no data rows"),
    ("ok 1 2\nb\xff\xfed 3 4\n", "h.txt:2:2: key is not valid UTF-8: 'b\\xff\\xfed'"),
]


@pytest.mark.parametrize("content,message", BAD)
def test_bad_input_names_the_place_and_leaves_nothing(embstore_bin, tmp_path, content, message):
    src = write(tmp_path / "h.txt", content.encode("latin-1"))
    out = convert(embstore_bin, src, tmp_path / "out.emb")
    assert out.returncode == 1, out.stdout
    assert message in out.stderr
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("data,message", [
    (b"2 2\nab " + struct.pack("<2f", 1, 2) + b"\ncd " + struct.pack("<f", 1),
     "v.bin: word2vec-binary row 2 (byte 16) 'cd': expected 8 bytes of values (2 float32), "
     "the file ends after 4"),
    (b"1 2\nab " + struct.pack("<2f", 1, 2) + b"\nextra", "continues after the 1 rows"),
    (b"1 2\n\xff\xfe " + struct.pack("<2f", 1, 2),
     "v.bin: word2vec-binary row 1 (byte 4): key is not valid UTF-8"),
])
def test_bad_word2vec_binary(embstore_bin, tmp_path, data, message):
    src = write(tmp_path / "v.bin", data)
    out = convert(embstore_bin, src, tmp_path / "out.emb", "--format", "word2vec-binary")
    assert out.returncode == 1, out.stdout
    assert message in out.stderr
    assert leftovers(tmp_path) == []


def test_duplicate_key_policies(embstore_bin, tmp_path):
    src = write(tmp_path / "d.txt", "a 1 1\nb 2 2\na 3 3\n")
    out = convert(embstore_bin, src, tmp_path / "f.emb", "--on-duplicate-key", "first")
    assert out.returncode == 0, out.stderr
    m, keys, _ = read_table(tmp_path / "f.emb")
    assert keys == ["a", "b"] and m.tolist() == [[1, 1], [2, 2]]
    out = convert(embstore_bin, src, tmp_path / "l.emb", "--on-duplicate-key", "last")
    assert out.returncode == 0, out.stderr
    m, keys, _ = read_table(tmp_path / "l.emb")
    assert keys == ["a", "b"] and m.tolist() == [[3, 3], [2, 2]]


def test_existing_output_is_untouched_without_force(embstore_bin, tmp_path):
    dst = write(tmp_path / "out.emb", b"precious")
    src = write(tmp_path / "m.txt", "1 2\n")
    out = convert(embstore_bin, src, dst)
    assert out.returncode == 1 and "--force" in out.stderr
    assert open(dst, "rb").read() == b"precious"
    out = convert(embstore_bin, write(tmp_path / "bad.txt", "1 2\n3\n"), dst, "--force")
    assert out.returncode == 1
    assert open(dst, "rb").read() == b"precious"
    out = convert(embstore_bin, src, dst, "--force", "--meta", "team=search", "--meta", "v=2")
    assert out.returncode == 0, out.stderr
    m, _, meta = read_table(dst)
    assert m.tolist() == [[1, 2]] and meta["team"] == "search" and meta["v"] == "2"
    assert sorted(os.listdir(tmp_path)) == ["bad.txt", "m.txt", "out.emb"]


@pytest.mark.parametrize("args", [["--format", "csv"], ["--delimiter", "ab"],
                                  ["--meta", "novalue"], ["--dtype", "f64"],
                                  ["--on-overflow", "wrap"], ["--meta", "embstore.x=1"]])
def test_usage_errors_exit_2(embstore_bin, tmp_path, args):
    src = write(tmp_path / "m.txt", "1 2\n")
    out = convert(embstore_bin, src, tmp_path / "out.emb", *args)
    assert out.returncode == 2, out.stderr
    assert leftovers(tmp_path) == []


def test_missing_input_is_a_failure_not_a_crash(embstore_bin, tmp_path):
    out = convert(embstore_bin, tmp_path / "nope.txt", tmp_path / "out.emb")
    assert out.returncode == 1 and "nope.txt" in out.stderr


def test_help(embstore_bin):
    out = run([embstore_bin, "convert", "--help"])
    assert out.returncode == 0
    for flag in ["--format", "--dtype", "--delimiter", "--comments", "--skip-rows", "--threads",
                 "--force", "--meta", "--on-duplicate-key", "--on-overflow"]:
        assert flag in out.stdout


def test_every_forced_kernel_writes_the_same_table(embstore_bin, tmp_path):
    rng = np.random.default_rng(9)
    lines = []
    for r in range(400):
        vals = rng.standard_normal(24) * 10.0 ** rng.integers(-5, 6, 24)
        fmts = ["%.18e", "%.8g", "%.3f", "%g"]
        lines.append(" ".join(fmts[(r + c) % 4] % v for c, v in enumerate(vals)))
    src = write(tmp_path / "m.txt", "\n".join(lines) + "\n")
    tables = {}
    for kernel in ["scalar", "avx2", "avx512"]:
        for dtype in ["f32", "f16", "bf16"]:
            dst = tmp_path / f"{kernel}_{dtype}.emb"
            out = run([embstore_bin, "convert", src, dst, "--dtype", dtype, "--threads", "2",
                       "--on-overflow", "inf"],
                      env={**os.environ, "EMBSTORE_FORCE_KERNEL": kernel})
            assert out.returncode == 0, out.stderr
            # An unsupported kernel falls back to the best one the CPU has; scalar always runs.
            if kernel == "scalar":
                assert "scalar kernel" in out.stdout
            tables[kernel, dtype] = np.asarray(read_table(dst)[0]).tobytes()
    for dtype in ["f32", "f16", "bf16"]:
        assert tables["scalar", dtype] == tables["avx2", dtype] == tables["avx512", dtype]


def test_an_unknown_forced_kernel_warns_once_and_uses_the_best(embstore_bin, tmp_path):
    src = write(tmp_path / "m.txt", "1 2\n3 4\n")
    best = run([embstore_bin, "convert", src, tmp_path / "best.emb"],
               env={k: v for k, v in os.environ.items() if k != "EMBSTORE_FORCE_KERNEL"})
    assert best.returncode == 0, best.stderr
    assert "warning" not in best.stderr
    for value in ["sse9", "AVX2", " "]:
        out = run([embstore_bin, "convert", src, tmp_path / "t.emb", "--force"],
                  env={**os.environ, "EMBSTORE_FORCE_KERNEL": value})
        assert out.returncode == 0, out.stderr
        warnings = [line for line in out.stderr.splitlines() if "EMBSTORE_FORCE_KERNEL" in line]
        assert len(warnings) == 1, out.stderr
        assert f"EMBSTORE_FORCE_KERNEL={value} is not one of scalar, avx2, avx512" in warnings[0]
        # The same kernel as without the variable: the best this CPU runs.
        assert best.stdout.split(", ")[-1] == out.stdout.split(", ")[-1]


# --- Whitespace np.loadtxt splits on, control bytes, and what detection reports -----------------

@pytest.mark.parametrize("space,name", [
    ("\v", "U+000B"), ("\f", "U+000C"), ("\x1f", "U+001F"), ("\u00a0", "U+00A0"),
    ("\u2003", "a Unicode space"), ("\u3000", "U+3000"), ("\u202f", "U+202F")])
def test_whitespace_loadtxt_splits_on_is_refused_by_name(embstore_bin, tmp_path, space, name):
    src = write(tmp_path / "m.txt", f"1{space}2 3\n4 5 6\n")
    assert np.loadtxt(src).shape == (2, 3)  # numpy splits on it
    out = convert(embstore_bin, src, tmp_path / "m.emb")
    assert out.returncode == 1
    assert "m.txt:1:1:" in out.stderr and name in out.stderr, out.stderr
    assert "replace it with a space" in out.stderr
    # The character is shown escaped, never as a look-alike space.
    assert space not in out.stderr
    # The same on a later line, where the parser finds it.
    src = write(tmp_path / "n.txt", f"1 2 3\n4{space}5 6\n")
    out = convert(embstore_bin, src, tmp_path / "n.emb")
    assert out.returncode == 1 and "n.txt:2:" in out.stderr and name in out.stderr, out.stderr
    assert leftovers(tmp_path) == []


def test_nul_byte_in_matrix_text_is_a_bad_number_on_its_line(embstore_bin, tmp_path):
    src = write(tmp_path / "m.txt", b"1 2\n3\x004\n")
    out = convert(embstore_bin, src, tmp_path / "m.emb")
    assert out.returncode == 1
    assert "m.txt:2:1: '3\\x004' is not a number" in out.stderr, out.stderr


def test_word2vec_header_with_rows_of_the_wrong_width_names_the_header(embstore_bin, tmp_path):
    src = write(tmp_path / "w.vec", "2 3\na 1 2\nb 1 2\n")
    out = convert(embstore_bin, src, tmp_path / "w.emb")
    assert out.returncode == 1
    assert "w.vec:2:6: row has 2 values, expected 3 (from the header on line 1)" in out.stderr, \
        out.stderr


def test_failed_binary_detection_says_what_was_detected(embstore_bin, tmp_path):
    src = write(tmp_path / "t.bin", b"2 3\nab \x00\x00")
    out = convert(embstore_bin, src, tmp_path / "t.emb")
    assert out.returncode == 1
    assert "detected word2vec-binary: line 1 '2 3' is a word2vec header" in out.stderr
    assert "use --format" in out.stderr
