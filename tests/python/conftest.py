"""Shared fixtures: where the built binaries are, and tables of known values."""
import os
import pathlib
import subprocess

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


def _find_binary(env_var, relpath):
    explicit = os.environ.get(env_var)
    if explicit:
        return pathlib.Path(explicit)
    build_dir = pathlib.Path(os.environ.get("EMBSTORE_BUILD_DIR", ROOT / "build" / "dev"))
    path = build_dir / relpath
    if not path.exists():
        pytest.fail(f"{path} is missing: build first (scripts/test.sh does) or set {env_var}")
    return path


@pytest.fixture(scope="session")
def embstore_bin():
    """Path of the built `embstore` binary."""
    return _find_binary("EMBSTORE_BIN", "cli/embstore")


@pytest.fixture(scope="session")
def make_table_bin():
    """Path of the `embstore_make_test_table` tool."""
    return _find_binary("EMBSTORE_MAKE_TABLE_BIN", "tests/embstore_make_test_table")


def expected_matrix(rows, dim):
    """The values embstore_make_test_table writes: ((31r + 7c) % 256 - 128) / 4."""
    r = np.arange(rows, dtype=np.int64)[:, None]
    c = np.arange(dim, dtype=np.int64)[None, :]
    return (((r * 31 + c * 7) % 256 - 128) / 4).astype(np.float32)


@pytest.fixture
def make_table(make_table_bin, tmp_path):
    """make_table(rows, dim, dtype="f32", keys=False, block_rows=0) -> path of a new table."""
    counter = [0]

    def make(rows, dim, dtype="f32", keys=False, block_rows=0, unicode_keys=False):
        counter[0] += 1
        path = tmp_path / f"t{counter[0]}.emb"
        cmd = [str(make_table_bin), str(path), "--rows", str(rows), "--dim", str(dim),
               "--dtype", dtype, "--block-rows", str(block_rows)]
        if keys:
            cmd.append("--keys")
        if unicode_keys:
            cmd.append("--unicode-keys")
        subprocess.run(cmd, check=True)
        return path

    return make


def run(cmd, **kw):
    """Runs a command and returns the CompletedProcess with text output (never raises)."""
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
