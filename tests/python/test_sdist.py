"""scripts/sdist.sh builds the source distribution; pip builds and installs it from source with
the system's libraries into a fresh virtual environment, where it loads a table and runs the CLI.
A missing library fails the build naming the Debian packages to install."""
import re
import subprocess
import sys
import tarfile

import pytest

from conftest import ROOT, expected_matrix, write_table

# The install compiles the library components and the CLI from scratch (about 3 minutes of
# two cores).
pytestmark = pytest.mark.timeout(1800)


def _pin(name):
    text = (ROOT / "requirements.txt").read_text()
    return re.search(rf"^{re.escape(name)}==\S+", text, re.M).group(0)


@pytest.fixture(scope="module")
def sdist(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    r = subprocess.run(["bash", str(ROOT / "scripts" / "sdist.sh"), str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    (path,) = out.glob("embstore-*.tar.gz")
    return path


def test_the_sdist_holds_the_tree_the_package_builds_and_no_tests(sdist):
    with tarfile.open(sdist) as t:
        names = t.getnames()
        top = names[0].split("/")[0]
        pyproject = t.extractfile(f"{top}/pyproject.toml").read().decode()
        assert "Name: embstore" in t.extractfile(f"{top}/PKG-INFO").read().decode()
    rel = {n.split("/", 1)[1] for n in names if "/" in n}
    for want in ("CMakeLists.txt", "cmake/EmbstoreDependencies.cmake", "store/src/table.cc",
                 "client/src/load.cc", "cli/main.cc", "python/src/native.cc",
                 "python/embstore/__init__.py", "LICENSE", "README.md"):
        assert want in rel, want
    assert not [n for n in rel if n.startswith(("tests/", "bench/", "docs/", "testkit/"))]
    assert 'cmake.source-dir = "."' in pyproject
    assert 'wheel.packages = ["python/embstore"]' in pyproject


def test_a_missing_library_is_named_with_its_debian_package(sdist, tmp_path):
    with tarfile.open(sdist) as t:
        # The "data" filter where this Python has it (3.11.4 and later; Debian 12's is 3.11.2).
        t.extractall(tmp_path, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    (src,) = tmp_path.glob("embstore-*")
    r = subprocess.run(["cmake", "-S", str(src), "-B", str(tmp_path / "b"), "-G", "Ninja",
                        "-DEMBSTORE_BUILD_TESTS=OFF", "-DEMBSTORE_BUILD_BENCH=OFF",
                        "-DCMAKE_DISABLE_FIND_PACKAGE_gRPC=ON",
                        "-DCMAKE_DISABLE_FIND_PACKAGE_CURL=ON"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode != 0
    assert "embstore cannot be built here: gRPC C++, libcurl 7.75 not found" in r.stderr, r.stderr
    assert "sudo apt-get install libgrpc++-dev protobuf-compiler-grpc libcurl4-openssl-dev" in \
        r.stderr, r.stderr


def test_pip_builds_the_sdist_from_source_and_it_works(sdist, make_table_bin, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    _pin("numpy"), _pin("nanobind"), _pin("scikit-build-core")],
                   check=True, timeout=600)
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "--no-build-isolation", str(sdist)],
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    table = write_table(make_table_bin, tmp_path / "t.emb", 500, 8, keys=True)
    code = ("import embstore, numpy, sys; m = embstore.load(sys.argv[1]); "
            "print(m.shape, float(m[3, 2]))")
    out = subprocess.run([str(py), "-c", code, str(table)], capture_output=True, text=True,
                         check=True, cwd=tmp_path).stdout
    assert out.strip() == f"(500, 8) {float(expected_matrix(500, 8)[3, 2])}", out
    help_out = subprocess.run([str(venv / "bin" / "embstore"), "--help"], capture_output=True,
                              text=True, check=True).stdout
    assert "Usage: embstore" in help_out
