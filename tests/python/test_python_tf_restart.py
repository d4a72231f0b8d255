"""embstore.tf with MonitoredTrainingSession across crashes and restarts (issue #12, item 2).

MonitoredTrainingSession's CheckpointSaverHook writes the first checkpoint right after the
session is created, before any user hook's after_create_session() runs. If the table reached the
variable only then, that first checkpoint would hold the variable's zeros, and a job killed before
the next periodic save would restart from zeros for good. Each run here is a child process, so a
crash is a real os._exit() with nothing flushed.
"""
import glob
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")

from conftest import expected_matrix  # noqa: E402

ROWS, DIM = 300, 8

# One training run: a variable of zeros filled from the table at session start, "training" that
# adds 1 to every value per step, MonitoredTrainingSession's default periodic saving (every 600 s,
# so within a short run only the checkpoint written at session start and the one written at a
# clean close exist). Saves the variable as the session started to start.npy.
CHILD = r"""
import os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import numpy as np
import tensorflow as tf
import embstore.tf

mode, table, ckpt, steps, crash, out = sys.argv[1:]
rows, dim = {rows}, {dim}
with tf.Graph().as_default():
    v = tf.compat.v1.get_variable("emb", [rows, dim], initializer=tf.zeros_initializer())
    step = tf.compat.v1.train.get_or_create_global_step()
    train = tf.group(tf.compat.v1.assign_add(v, tf.ones([rows, dim])),
                     tf.compat.v1.assign_add(step, 1))
    if mode == "hook":
        kw = dict(hooks=[embstore.tf.init_hook({{v: None}}, table)])
    elif mode == "hook_checkpoint_dir":
        kw = dict(hooks=[embstore.tf.init_hook({{v: None}}, table, checkpoint_dir=ckpt)])
    else:
        kw = dict(scaffold=embstore.tf.scaffold({{v: None}}, table))
    with tf.compat.v1.train.MonitoredTrainingSession(checkpoint_dir=ckpt, **kw) as sess:
        np.save(os.path.join(out, "start.npy"), sess.run(v))
        for _ in range(int(steps)):
            sess.run(train)
        if crash == "1":
            os._exit(3)
""".format(rows=ROWS, dim=DIM)


def _run(script, mode, table, ckpt, steps, crash, out):
    proc = subprocess.run([sys.executable, str(script), mode, str(table), str(ckpt), str(steps),
                           "1" if crash else "0", str(out)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == (3 if crash else 0), proc.stderr[-4000:]
    return np.load(out / "start.npy")


def _checkpoints(ckpt):
    """{global step: the variable} of every checkpoint in the directory."""
    out = {}
    for index in glob.glob(os.path.join(ckpt, "model.ckpt-*.index")):
        prefix = index[:-len(".index")]
        out[int(prefix.rsplit("-", 1)[1])] = tf.train.load_checkpoint(prefix).get_tensor("emb")
    return out


@pytest.mark.parametrize("mode", ["hook", "hook_checkpoint_dir", "scaffold"])
def test_crash_before_first_periodic_save_restarts_from_the_table(make_table, tmp_path, mode):
    table = make_table(ROWS, DIM)
    want = expected_matrix(ROWS, DIM)
    script = tmp_path / "train.py"
    script.write_text(CHILD)
    ckpt = tmp_path / "ckpt"

    # Run 1 trains 3 steps and dies before any periodic save: only the checkpoint written at
    # session start exists, and it already holds the table.
    start = _run(script, mode, table, ckpt, 3, True, tmp_path)
    np.testing.assert_array_equal(start, want)
    saved = _checkpoints(ckpt)
    assert list(saved) == [0]
    np.testing.assert_array_equal(saved[0], want)

    # Run 2 restores that checkpoint: the table's values, not zeros. It trains 2 steps and stops
    # cleanly, which saves step 2.
    start = _run(script, mode, table, ckpt, 2, False, tmp_path)
    np.testing.assert_array_equal(start, want)

    # Run 3 restores the trained values; the table does not overwrite them. Without the table
    # file it also shows that a restoring session never opens the source.
    shutil.move(str(table), str(tmp_path / "gone.emb"))
    start = _run(script, mode, table, ckpt, 0, False, tmp_path)
    np.testing.assert_array_equal(start, want + 2)

    # No checkpoint ever held the zeros: each one is the table plus its steps of training.
    saved = _checkpoints(ckpt)
    assert sorted(saved) == [0, 2]
    for step, value in saved.items():
        np.testing.assert_array_equal(value, want + step)
