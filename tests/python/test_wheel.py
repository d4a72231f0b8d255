"""scripts/wheel.sh builds a self-contained wheel; installed into a fresh virtual environment
(numpy only, no TensorFlow or PyTorch) it loads a table from a file and from a server, and puts
the `embstore` command on PATH. The wheel is built in the editable install's build tree
(build/python/<wheel tag>, or build/dev under scripts/test.sh: scripts/package_settings.sh), so
the C++ sources are not compiled again."""
import os
import pathlib
import subprocess
import sys
import sysconfig
import zipfile

import pytest

from conftest import ROOT, expected_matrix, write_table


# A cold build (no editable install yet) compiles the whole C++ tree: minutes on two cores. The
# module fixture's time counts against the first test.
pytestmark = pytest.mark.timeout(1800)


def _editable_build_dir():
    """scikit-build-core's {wheel_tag} for this interpreter, as python/pyproject.toml's build-dir."""
    py = f"cp{sys.version_info.major}{sys.version_info.minor}"
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return ROOT / "build" / "python" / f"{py}-{py}-{plat}"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    env = dict(os.environ, EMBSTORE_WHEEL_BUILD_DIR=str(_editable_build_dir()))
    r = subprocess.run(["bash", str(ROOT / "scripts" / "wheel.sh"), "--debian", str(out)], env=env,
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stdout + r.stderr
    wheels = list(out.glob("embstore-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0], r.stdout


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory):
    d = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(d)], check=True)
    py = d / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    str(wheel[0]), "numpy"], check=True, timeout=600)
    return d


def test_the_wheel_is_manylinux_and_vendors_its_libraries(wheel):
    path, log = wheel
    assert "manylinux" in path.name and path.name.endswith("_x86_64.whl"), path.name
    names = zipfile.ZipFile(path).namelist()
    assert "embstore/bin/embstore" in names
    assert "_embstore_cli.py" in names  # the console script's launcher, outside the package
    assert any(n.startswith("embstore/_native") for n in names)
    vendored = [n for n in names if n.startswith("embstore.libs/")]
    for lib in ("libgrpc++", "libprotobuf", "libabsl"):
        assert any(lib in n for n in vendored), (lib, vendored)
    assert any(n.endswith("LICENSE") for n in names)
    assert "following platform tag" in log and "manylinux_2_" in log  # auditwheel show


def _run(venv, *args, **kw):
    env = dict(os.environ, PATH=f"{venv / 'bin'}:{os.environ['PATH']}")
    env.pop("PYTHONPATH", None)
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env,
                          cwd="/", **kw)


def test_a_fresh_environment_loads_from_a_file_and_a_server_and_has_the_cli(venv, make_table_bin,
                                                                             tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    write_table(make_table_bin, store / "t.emb", 500, 8, keys=True)
    r = _run(venv, venv / "bin" / "embstore", "--help")
    assert r.returncode == 0 and "convert" in r.stdout and "serve" in r.stdout, r.stderr
    r = _run(venv, "embstore", "verify", store / "t.emb")
    assert r.returncode == 0, r.stderr
    # The launcher starts the CLI without importing numpy or the package (0.1 s per command).
    r = _run(venv, venv / "bin" / "python", "-c",
             "import sys, _embstore_cli; print(_embstore_cli._binary()); "
             "print([m for m in ('numpy', 'embstore') if m in sys.modules])")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == [
        str(next(venv.glob("lib/python3*/site-packages/embstore/bin/embstore"))), "[]"], r.stdout
    sock = tmp_path / "s.sock"
    server = subprocess.Popen([str(venv / "bin" / "embstore"), "serve", "--store", str(store),
                               "--listen", f"unix:{sock}", "--log-level", "warn"])
    try:
        r = _run(venv, "embstore", "health", "--from", f"unix:{sock}", "--wait", "30")
        assert r.returncode == 0, r.stderr
        code = (
            "import sys, numpy as np, embstore\n"
            "a = embstore.load(sys.argv[1]); b = embstore.load(sys.argv[2], 't', local=False)\n"
            "assert np.array_equal(a, b); print(a.shape, embstore.__version__)\n"
            "try:\n    import embstore.tf\nexcept ImportError as e:\n    print('tf:', e)\n"
            "try:\n    import embstore.torch\nexcept ImportError as e:\n    print('torch:', e)\n")
        r = _run(venv, venv / "bin" / "python", "-c", code, store / "t.emb", f"unix:{sock}")
        assert r.returncode == 0, r.stderr
        assert "(500, 8)" in r.stdout
        assert "embstore.tf needs TensorFlow" in r.stdout
        assert "embstore.torch needs PyTorch" in r.stdout
    finally:
        server.terminate()
        server.wait(timeout=15)
    np_want = expected_matrix(500, 8)
    assert np_want.shape == (500, 8)


@pytest.mark.parametrize("args, message", [
    (["--target", "armv7"], "--target takes x86_64 or aarch64 (got 'armv7')"),
    (["--target", "aarch64"], "no manylinux_2_28 aarch64 wheels in"),
])
def test_test_wheels_refuses_a_bad_target_and_a_dist_without_its_wheels(tmp_path, args, message):
    # An x86_64 wheel alone does not satisfy --target aarch64: nothing is checked, and it says so.
    (tmp_path / "embstore-0.1.0-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    r = subprocess.run(["bash", str(ROOT / "scripts" / "test-wheels.sh"), *args, str(tmp_path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert message in r.stderr, r.stderr
