"""The TensorFlow 2.15 suite: tf.estimator and Keras 2, run in .venv-tf215.

scripts/test.sh runs these files with the interpreter of .venv-tf215 (requirements-tf215.txt:
tensorflow-cpu 2.15.1, the last release with tf.estimator; its tf.keras is Keras 2; numpy 1.x),
together with the TensorFlow files of tests/python. TensorFlow 2.16 and later have no
tf.estimator, so in the main .venv every test here is skipped, naming why.

The fixtures and helpers of tests/python/conftest.py (built binaries, tables of known values,
a server) are shared: that file is loaded here under its own module name, and its public names
are re-exported, so `from conftest import ...` finds them whichever conftest pytest loaded last.
"""
import importlib.util
import os
import pathlib
import sys

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

_SHARED = pathlib.Path(__file__).resolve().parents[1] / "python" / "conftest.py"
_spec = importlib.util.spec_from_file_location("embstore_tests_shared", _SHARED)
_shared = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _shared
_spec.loader.exec_module(_shared)
# tests/python on sys.path, as pytest puts it for its own files: helpers there import each other.
sys.path.insert(0, str(_SHARED.parent))

for _name in dir(_shared):
    if not _name.startswith("_"):
        globals()[_name] = getattr(_shared, _name)


def pytest_collection_modifyitems(config, items):
    """Outside .venv-tf215 (TensorFlow 2.16 and later), every test here says why it cannot run."""
    if importlib.util.find_spec("tensorflow_estimator") is not None:
        return
    skip = pytest.mark.skip(reason="needs tf.estimator, which TensorFlow removed in 2.16: runs in "
                                   ".venv-tf215 (scripts/setup.sh, scripts/test.sh)")
    here = pathlib.Path(__file__).parent
    for item in items:
        if here in pathlib.Path(item.fspath).parents:
            item.add_marker(skip)
