"""The data every benchmark runs on: the build that makes it, the seed's sizes, text files as
np.savetxt writes them, and the word2vec text form."""
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]

# The seed: a 938,280 x 128 float32 matrix.
SEED_ROWS, SEED_DIM = 938_280, 128

# Rows of the word2vec-form file gensim and embstore both read: gensim parses in Python, 5-15k
# rows/s here (one to three minutes for the seed).
GENSIM_ROWS = 100_000


def find_build_dir(explicit, needs, who):
    """The first build dir holding every path in `needs`: `explicit`, then $EMBSTORE_BUILD_DIR,
    then build/release, build/bench and build/dev. Exits naming `who` when none does."""
    candidates = [explicit] if explicit else []
    if os.environ.get("EMBSTORE_BUILD_DIR"):
        candidates.append(os.environ["EMBSTORE_BUILD_DIR"])
    candidates += [ROOT / "build" / d for d in ("release", "bench", "dev")]
    for c in candidates:
        c = pathlib.Path(c)
        if all((c / n).exists() for n in needs):
            return c
    sys.exit(f"{who}: no build dir holds " + ", ".join(needs) + "; build them first "
             "(see docs/benchmarks.md) or pass --build-dir")


def work_dir(prefix, need_bytes=0, base=None):
    """A new temporary directory for generated data (a context manager yielding its path): under
    `base` when given; else on /dev/shm when it has `need_bytes` free, so the disk's speed stays
    out of the numbers; else in the default temporary directory."""
    if base is None:
        shm = pathlib.Path("/dev/shm")
        if shm.is_dir() and shutil.disk_usage(shm).free > need_bytes:
            base = str(shm)
    return tempfile.TemporaryDirectory(prefix=prefix, dir=base)


def make_test_table(build, path, rows, dim, keys=False):
    """`path`, a new rows x dim float32 table (with keys "key<row>" when `keys`) made by
    tests/embstore_make_test_table: row r, column c holds ((31r + 7c) % 256 - 128) / 4."""
    cmd = [str(pathlib.Path(build) / "tests" / "embstore_make_test_table"), str(path), "--rows",
           str(rows), "--dim", str(dim), "--force"] + (["--keys"] if keys else [])
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return path


def gen_text(build, path, rows, dim, fmt):
    """`path`, a rows x dim text matrix as np.savetxt writes it with fmt 'e18' ('%.18e') or
    'g8' ('%.8g'), made by bench/gen_text.cc unless it exists."""
    if not path.exists():
        subprocess.run([str(build / "bench" / "embstore_gen_text"), f"{path}.part", str(rows),
                        str(dim), fmt], check=True)
        os.replace(f"{path}.part", path)
    return path


def word2vec_form(src, dst, rows, dim):
    """The word2vec text form of the first `rows` rows of a matrix text file: a "ROWS DIM" line,
    then "w<i> v1 .. vDIM"."""
    if dst.exists():
        return dst
    with open(src, "rb") as f, open(f"{dst}.part", "wb") as out:
        out.write(f"{rows} {dim}\n".encode())
        for i, line in enumerate(f):
            if i == rows:
                break
            out.write(b"w%d " % i)
            out.write(line)
    os.replace(f"{dst}.part", dst)
    return dst


def warm(path):
    """Reads `path` once, so every contender finds it in the page cache."""
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass
