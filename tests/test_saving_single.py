"""tfring.saving in one process: atomic TF checkpoints (index last) and SavedModels, and
the Keras attributes save_hooks reads (pinned to Keras 3.15)."""

import importlib.util
import os

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="needs TensorFlow")


def test_checkpoint_prefix_written_atomically_and_failure_keeps_previous(tmp_path):
    import tensorflow as tf

    from tfring.saving import atomic_write_checkpoint

    v = tf.Variable([1.0, 2.0])
    prefix = str(tmp_path / "ckpt-1")
    atomic_write_checkpoint(prefix, lambda tmp: tf.train.Checkpoint(v=v).write(tmp))
    assert sorted(os.listdir(tmp_path)) == ["ckpt-1.data-00000-of-00001", "ckpt-1.index"]
    v.assign([3.0, 4.0])

    def dies(tmp):
        tf.train.Checkpoint(v=v).write(tmp)
        raise KeyboardInterrupt("killed before the rename")

    with pytest.raises(KeyboardInterrupt):
        atomic_write_checkpoint(prefix, dies)
    assert sorted(os.listdir(tmp_path)) == ["ckpt-1.data-00000-of-00001", "ckpt-1.index"]
    tf.train.Checkpoint(v=v).read(prefix).assert_consumed()
    np.testing.assert_array_equal(v.numpy(), [1.0, 2.0])


def test_saved_model_directory_replaced_atomically(tmp_path):
    import tensorflow as tf

    from tfring.saving import atomic_write_directory

    module = tf.Module()
    module.v = tf.Variable(1.0)
    path = str(tmp_path / "saved")
    for value in (1.0, 2.0):
        module.v.assign(value)
        atomic_write_directory(path, lambda tmp: tf.saved_model.save(module, tmp))
        assert tf.saved_model.load(path).v.numpy() == value
    assert os.listdir(tmp_path) == ["saved"]


def test_keras_backup_and_restore_has_the_attributes_save_hooks_reads(tmp_path):
    import keras

    from tfring import _private_api

    cb = keras.callbacks.BackupAndRestore(str(tmp_path))
    missing = [a for a in _private_api.KERAS_BACKUP_ATTRIBUTES if not hasattr(cb, a)]
    assert not missing, f"Keras BackupAndRestore lost {missing}: update tfring/_distribute/save_hooks.py"
