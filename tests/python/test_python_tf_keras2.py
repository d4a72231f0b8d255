"""embstore.tf.Initializer with Keras 2: tf-keras on TensorFlow 2.21 (TF_USE_LEGACY_KERAS=1), and
the tf.keras of TensorFlow 2.15 (scripts/test.sh runs this file in .venv-tf215 too).

Keras 2 loads `.keras` files, `.h5` files and SavedModel directories each its own way; in every
one the saved weights must come back without the initializer touching the table (it is moved
away), while a model built from a config outside load_model (clone_model) loads it. Keras picks
its version when TensorFlow is first imported, so each case is a child process.
"""
import importlib.util
import os
import subprocess
import sys

import pytest

pytest.importorskip("tensorflow")

from conftest import write_table  # noqa: E402

ROWS, DIM = 500, 8

CHILD = r"""
import importlib, os, sys
import numpy as np
import tensorflow as tf
import embstore.tf

table, fmt, workdir = sys.argv[1:]
keras = tf.keras
version = importlib.import_module(keras.Sequential.__module__.split(".")[0]).__version__
assert version.startswith("2."), version
want = embstore.load(table)
ids = np.array([[0, 1, {last}]], dtype=np.int32)

model = keras.Sequential([keras.Input((3,), dtype="int32"), keras.layers.Embedding(
    {rows}, {dim}, embeddings_initializer=embstore.tf.Initializer(table))])
np.testing.assert_array_equal(model.layers[0].embeddings.numpy(), want)
config = model.layers[0].get_config()["embeddings_initializer"]
assert config["config"] == {{"source": table, "table": None, "rows": None}}, config
assert "embstore" in str(config.get("registered_name", config.get("class_name"))), config

path = os.path.join(workdir, {{"keras": "m.keras", "h5": "m.h5", "savedmodel": "m"}}[fmt])
model.save(path)
os.rename(table, table + ".moved")  # loading must not need the table
loaded = keras.models.load_model(path)
np.testing.assert_array_equal(loaded(ids).numpy()[0], want[[0, 1, {last}]])
if fmt != "savedmodel":  # a revived SavedModel layer keeps no initializer object
    assert isinstance(loaded.layers[0].embeddings_initializer, embstore.tf.Initializer)
os.rename(table + ".moved", table)
clone = keras.models.clone_model(loaded)  # a new model: its initializer loads the table
np.testing.assert_array_equal(clone.layers[0].embeddings.numpy(), want)
print("ok", version)
""".format(rows=ROWS, dim=DIM, last=ROWS - 1)


def _keras2_env():
    """The environment that makes tf.keras Keras 2 here, or None."""
    import tensorflow as tf
    if tf.__version__.startswith("2.15."):
        return dict(os.environ)
    if importlib.util.find_spec("tf_keras") is None:
        return None
    return dict(os.environ, TF_USE_LEGACY_KERAS="1")


@pytest.mark.parametrize("fmt", ["keras", "h5", "savedmodel"])
def test_keras2_models_load_back_without_the_table(make_table_bin, tmp_path, fmt):
    env = _keras2_env()
    if env is None:
        pytest.skip("tf-keras is not installed (scripts/setup.sh installs it into .venv)")
    table = str(write_table(make_table_bin, tmp_path / "item_mat.emb", ROWS, DIM))
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    out = subprocess.run([sys.executable, str(script), table, fmt, str(tmp_path)],
                         capture_output=True, text=True, env=env, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr[-4000:]
    assert out.stdout.startswith("ok 2.")
