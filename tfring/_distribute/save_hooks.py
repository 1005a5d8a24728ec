"""Keras and TensorFlow saves written once, by rank 0, atomically (installed by the first
``RingStrategy()``; active while tfring runs more than one process).

A script written for one process saves on every rank; without these hooks the ranks write
the same files at once and tear them. Each entry point below runs as one coordinated save
(``tfring._saving.coordination``): rank 0 writes (temporary name, fsync, rename; a TF
checkpoint's index last) and publishes the outcome; every other rank runs the same call
without touching the files -- so ``save_counter``, ``CheckpointManager``'s list and
``latest_checkpoint`` advance identically everywhere -- then waits for rank 0's outcome.

=====================================================  ==========================================
entry point                                             hooked at
=====================================================  ==========================================
``model.save``, ``keras.saving/models.save_model``      ``saving_api.save_model``
``model.save_weights``                                  ``saving_api.save_weights``
Keras ``ModelCheckpoint``                               (calls ``model.save`` / ``save_weights``)
Keras ``BackupAndRestore``                              ``_save_model``, ``on_train_end``
a save's missing folder (``ModelCheckpoint``)           ``keras.src.utils.file_utils.makedirs``
``tf.train.Checkpoint.save`` / ``write``,               ``Checkpoint._write`` (the scope);
``CheckpointManager.save``                              ``TrackableSaver.save`` (the files),
                                                        ``update_checkpoint_state_internal``,
                                                        ``_delete_file_if_exists`` (rank 0 only)
``tf.saved_model.save``, ``model.export``               ``tf.saved_model.save``
=====================================================  ==========================================

Inside a ``tf.function`` (graph building) and for async checkpoints TF's own code runs
unchanged. Private symbols come from ``tfring._private_api`` (checked by its table).

Variables created during a save or a load are created locally, without the broadcast from
rank 0 that ``RingStrategy`` gives new variables (``variables.created_locally``): Keras
creates throwaway variables while saving and loading (once per process, on the first rank
that gets there), and a save or load may run on one rank only. Coordinated saves are local
through their role; these entry points are marked here:

========================================================  ================================
``keras.models.load_model``, ``keras.saving.load_model``  ``saving_api.load_model``
``model.load_weights``, Keras ``BackupAndRestore``        ``saving_api.load_weights``
``tf.train.Checkpoint.save`` (its ``save_counter``),      ``Checkpoint.save`` / ``read`` /
``read``, ``restore``                                     ``restore``
``tf.saved_model.load``                                   ``tf.saved_model.load``
========================================================  ================================
"""

import functools
import json
import os
import threading

from tfring import _private_api
from tfring._distribute import variables
from tfring._saving import atomic
from tfring._saving import coordination as co

_lock = threading.Lock()
_installed = False


def _tf_errors(fn):
    """tfring errors raised by the coordination as the matching tf.errors class (with the
    message as their argument), except the writer's error raised again on a waiting rank,
    which keeps the writer's class (``tfring._saving.writer_error``)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from tfring import _errors as errors
        from tfring._tensorflow.errors import to_tf_error

        try:
            return fn(*args, **kwargs)
        except co.SaveAbortedError as e:
            if type(e) is not co.SaveAbortedError:
                raise
            error = to_tf_error(e)
            error.args = (str(e),)
            raise error from e
        except errors.TfringError as e:
            error = to_tf_error(e)
            error.args = (str(e),)
            raise error from e

    return wrapper


def _patch(owner, name, make, aliases=()):
    """Replaces ``owner.name`` by ``make(original)``, and the public ``aliases`` (modules)
    that export the same function object under that name."""
    original = getattr(owner, name)
    hooked = make(original)
    hooked.__wrapped__ = original
    setattr(owner, name, hooked)
    for module in aliases:
        if getattr(module, name, None) is original:
            setattr(module, name, hooked)
    return original


def _created_locally(original):
    """``original`` with the variables it creates left local (see the module docstring)."""

    @functools.wraps(original)
    def hooked(*args, **kwargs):
        with variables.created_locally():
            return original(*args, **kwargs)

    return hooked


def install():
    """Installs every hook once per process (idempotent, thread-safe)."""
    global _installed
    with _lock:
        if _installed:
            return
        _install_keras()
        _install_tf_checkpoint()
        _install_saved_model()
        _installed = True


# -- Keras ---------------------------------------------------------------------------------
def _install_keras():
    import keras

    api = _private_api.keras_saving_api
    public = (keras.saving, keras.models)
    _patch(api, "save_model", _make_save_model, public)
    _patch(api, "save_weights", _make_save_weights, public)
    _patch(api, "load_model", _created_locally, public)
    _patch(api, "load_weights", _created_locally, public)
    cls = _private_api.KerasBackupAndRestore
    _patch(cls, "_save_model", _make_backup_save)
    _patch(cls, "on_train_end", _make_backup_end)
    _patch(_private_api.keras_file_utils, "makedirs", _make_makedirs)


def _make_makedirs(original):
    """Keras' ``file_utils.makedirs`` that accepts a folder another rank created first.

    ``ModelCheckpoint`` (and ``BackupAndRestore``, saving_lib) check whether a folder exists
    and then create it with ``os.makedirs`` (no ``exist_ok``). In one process the check
    makes that safe; run on every rank at once -- right after the step's allreduce has
    lined the ranks up -- one rank's ``makedirs`` raised FileExistsError. The folder
    existing as a folder afterwards is what one process gets; a file in its place still
    raises."""

    @functools.wraps(original)
    def makedirs(path):
        try:
            return original(path)
        except FileExistsError:
            if os.path.isdir(path):
                return None
            raise

    return makedirs


def _atomic_file(path, kwargs):
    """Whether a Keras file save can go through a temporary file (one local file)."""
    return (not atomic.is_remote(path) and kwargs.get("zipped", None) is not False
            and not kwargs.get("max_shard_size"))


def _make_save_model(original):
    @_tf_errors
    def save_model(model, filepath, overwrite=True, zipped=None, **kwargs):
        with co.coordinated_save(filepath, "model.save") as role:
            if role == co.WAITER:
                return None
            if role is None or not _atomic_file(filepath, {"zipped": zipped}) or (
                    not overwrite and os.path.exists(filepath)):
                return original(model, filepath, overwrite, zipped, **kwargs)
            atomic.atomic_write(filepath, lambda tmp: original(model, tmp, True, zipped, **kwargs))
            return None

    return save_model


def _make_save_weights(original):
    @_tf_errors
    def save_weights(model, filepath, overwrite=True, max_shard_size=None, **kwargs):
        with co.coordinated_save(filepath, "model.save_weights") as role:
            if role == co.WAITER:
                return None
            if role is None or not _atomic_file(filepath, {"max_shard_size": max_shard_size}) or (
                    not overwrite and os.path.exists(filepath)):
                return original(model, filepath, overwrite, max_shard_size, **kwargs)
            atomic.atomic_write(filepath, lambda tmp: original(model, tmp, True, max_shard_size, **kwargs))
            return None

    return save_weights


def _make_backup_save(original):
    @_tf_errors
    def _save_model(self):
        with co.coordinated_save(os.path.join(self.backup_dir, "<BackupAndRestore>"),
                                 "keras.callbacks.BackupAndRestore backup") as role:
            if role is None:
                return original(self)
            if role == co.WAITER:
                return None
            return _write_keras_backup(self)

    return _save_model


def _copy_atomically(src, dst):
    import shutil

    atomic.atomic_write(dst, lambda tmp: shutil.copyfile(src, tmp))


def _write_keras_backup(cb):
    """Keras' backup layout (``latest.weights.h5`` + ``training_metadata.json``), each file
    atomic; both temporaries complete before the weights (then the metadata) are renamed."""
    os.makedirs(cb.backup_dir, exist_ok=True)
    if cb.double_checkpoint and os.path.exists(cb._weights_path):
        _copy_atomically(cb._weights_path, cb._prev_weights_path)
    if cb.double_checkpoint and os.path.exists(cb._training_metadata_path):
        _copy_atomically(cb._training_metadata_path, cb._prev_training_metadata_path)
    cb.model.save_weights(filepath=cb._weights_path, overwrite=True)  # atomic (role: writer)
    metadata = json.dumps({"epoch": cb._current_epoch, "batch": cb._last_batch_seen})

    def write(tmp):
        with open(tmp, "w") as f:
            f.write(metadata)

    atomic.atomic_write(cb._training_metadata_path, write)


def _make_backup_end(original):
    @_tf_errors
    def on_train_end(self, logs=None):
        with co.coordinated_save(os.path.join(self.backup_dir, "<BackupAndRestore>"),
                                 "keras.callbacks.BackupAndRestore removal") as role:
            if role == co.WAITER:
                return None
            return original(self, logs)

    return on_train_end


# -- tf.train.Checkpoint / CheckpointManager ------------------------------------------------
def _eager():
    import tensorflow as tf

    return tf.executing_eagerly()


def _install_tf_checkpoint():
    for name in ("save", "read", "restore"):  # save and restore create the save_counter
        _patch(_private_api.Checkpoint, name, _created_locally)
    _patch(_private_api.Checkpoint, "_write", _make_checkpoint_write)
    _patch(_private_api.TrackableSaver, "save", _make_saver_save)
    management = _private_api.checkpoint_management
    _patch(management, "update_checkpoint_state_internal", _skipped_on_waiters)
    _patch(management, "_delete_file_if_exists", _skipped_on_waiters)


def _make_checkpoint_write(original):
    @_tf_errors
    def _write(self, file_prefix, options=None):
        if not _eager() or (options is not None and options.experimental_enable_async_checkpoint):
            return original(self, file_prefix, options)
        with co.coordinated_save(file_prefix, "tf.train.Checkpoint save"):
            # waiters run it too: write callbacks keep CheckpointManager's bookkeeping equal,
            # while the hooks below keep them away from the files
            return original(self, file_prefix, options)

    return _write


def _make_saver_save(original):
    def save(self, file_prefix, checkpoint_number=None, session=None, options=None):
        role = co.current_role()
        if role is None or checkpoint_number is not None or not _eager():
            return original(self, file_prefix, checkpoint_number, session, options)
        if role == co.WAITER:
            return os.fspath(file_prefix)
        result = []
        atomic.atomic_write_checkpoint(
            file_prefix, lambda tmp: result.append(original(self, tmp, None, session, options)))
        return os.fspath(file_prefix)

    return save


def _skipped_on_waiters(original):
    def hooked(*args, **kwargs):
        if co.current_role() == co.WAITER:
            return None
        return original(*args, **kwargs)

    return hooked


# -- SavedModel -----------------------------------------------------------------------------
def _install_saved_model():
    import tensorflow as tf

    module = _private_api.saved_model_save_module
    original = module.save
    hooked = _make_saved_model_save(original)
    hooked.__wrapped__ = original
    module.save = hooked
    if tf.saved_model.save is original:
        tf.saved_model.save = hooked
    _patch(_private_api.saved_model_load_module, "load", _created_locally, (tf.saved_model,))


def _make_saved_model_save(original):
    @functools.wraps(original)
    @_tf_errors
    def save(obj, export_dir, signatures=None, options=None):
        with co.coordinated_save(export_dir, "tf.saved_model.save") as role:
            if role == co.WAITER:
                return None
            if role is None:
                return original(obj, export_dir, signatures, options)
            atomic.atomic_write_directory(export_dir, lambda tmp: original(obj, tmp, signatures, options))
            return None

    return save
