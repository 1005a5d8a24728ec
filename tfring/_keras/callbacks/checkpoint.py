"""Checkpoints written by one rank, atomically, while the other ranks wait for them.

Every file is written to a temporary name in the destination's directory and moved into
place with ``os.replace`` (``tfring._saving.atomic``), so a job killed while saving leaves
the previous checkpoint intact and never a truncated one under the real name. When a
callback is given to every rank, the others wait (at most ``TFRING_TIMEOUT_S``) until the
root has decided and written, and get its error if the write failed
(``tfring._saving.coordination``); given to the root only, nobody waits.
"""

import json
import os
import shutil

import keras
import numpy as np

from tfring._basics import basics, ops
from tfring._keras import model_preparation, state
from tfring._saving import coordination
from tfring._saving.atomic import atomic_write


def _writes_here(role, root_rank):
    """Whether this rank writes: the writer of a coordinated save, or (one process, or
    tfring not initialized) the root rank itself."""
    return role == coordination.WRITER or (role is None and basics.rank() == root_rank)


def save_model_atomically(model, filepath, weights_only=False):
    """``model.save`` / ``model.save_weights`` through ``atomic_write``."""
    if weights_only:
        atomic_write(filepath, lambda tmp: model.save_weights(tmp, overwrite=True))
    else:
        atomic_write(filepath, lambda tmp: model.save(tmp, overwrite=True))


class ModelCheckpoint(keras.callbacks.ModelCheckpoint):
    """Keras' ``ModelCheckpoint`` (same arguments) that writes on ``root_rank`` only, and
    atomically (temporary file in the same directory, then ``os.replace``).

    May be given to every rank (the others do nothing) or to ``root_rank`` only. Put
    ``MetricAverageCallback`` before it when ``save_best_only`` monitors a metric, so the
    decision uses global values.

    Args:
      filepath, ...: as ``keras.callbacks.ModelCheckpoint`` (``.keras``, ``.h5`` or, with
        ``save_weights_only``, ``.weights.h5``).
      root_rank: the rank that writes (keyword only).
    """

    def __init__(self, filepath, *args, root_rank=0, **kwargs):
        super().__init__(filepath, *args, **kwargs)
        self.root_rank = root_rank

    def set_model(self, model):
        super().set_model(model)
        model_preparation.prepare_model(model)

    def _save_model(self, epoch, batch, logs):
        # One coordinated step per save opportunity: the root decides and writes, the other
        # ranks holding this callback wait for it (and get its error).
        with coordination.coordinated_save(
                self.filepath, "tfring.keras.callbacks.ModelCheckpoint save", writer=self.root_rank) as role:
            if _writes_here(role, self.root_rank):
                self._save_on_root(epoch, batch, logs)

    def _save_on_root(self, epoch, batch, logs):
        filepath = self._get_file_path(epoch, batch, logs)
        if os.path.isdir(filepath):
            raise OSError(
                "Please specify a non-directory filepath for ModelCheckpoint. Filepath used is an "
                f"existing directory: {filepath}"
            )
        if not self._should_save_model(epoch, batch, logs, filepath):
            return
        if os.path.dirname(filepath):  # as Keras' ModelCheckpoint: a missing folder is created
            os.makedirs(os.path.dirname(filepath), exist_ok=True)
        save_model_atomically(self.model, filepath, weights_only=self.save_weights_only)
        if self.verbose > 0:
            keras.utils.io_utils.print_msg(f"\nEpoch {epoch + 1}: finished saving model to {filepath}")


class BackupAndRestore(keras.callbacks.Callback):
    """Backs up the training state on ``root_rank`` so that an interrupted job, started
    again with the same command, resumes from the last backup (like Keras'
    ``BackupAndRestore``).

    Must run on every rank: at the start of training ``root_rank`` restores the backup and
    broadcasts the model, the optimizer state and the epoch to the others, so the backup
    directory only has to exist where ``root_rank`` runs.

    Each backup is a weights file ``backup-<n>.weights.h5`` plus ``training_metadata.json``
    naming it; both are written atomically and the metadata last, so it always names a
    complete weights file (a crash mid-backup resumes from the previous one).

    Args:
      backup_dir: directory for the backup (created when needed).
      save_freq: ``"epoch"`` or a number of batches.
      delete_checkpoint: remove ``backup_dir`` when training ends normally.
      root_rank: the rank that reads and writes the backup.
    """

    METADATA = "training_metadata.json"

    def __init__(self, backup_dir, save_freq="epoch", delete_checkpoint=True, root_rank=0):
        super().__init__()
        if not backup_dir:
            raise ValueError("Empty `backup_dir` argument passed")
        if save_freq != "epoch" and not (isinstance(save_freq, int) and save_freq > 0):
            raise ValueError(f"save_freq must be 'epoch' or a positive integer. Received: save_freq={save_freq!r}")
        self.backup_dir = os.fspath(backup_dir)
        self.save_freq = save_freq
        self.delete_checkpoint = delete_checkpoint
        self.root_rank = root_rank
        self._current_epoch = 0
        self._batches_since_save = 0
        self._last_batch = None
        self._sequence = 0

    def set_model(self, model):
        super().set_model(model)
        model_preparation.prepare_model(model)

    @property
    def _metadata_path(self):
        return os.path.join(self.backup_dir, self.METADATA)

    def _read_backup(self):
        """(weights path, epoch, sequence) of the last complete backup, or None."""
        if not os.path.exists(self._metadata_path):
            return None
        with open(self._metadata_path) as f:
            meta = json.load(f)
        # Keras' own BackupAndRestore layout has no "weights" key.
        weights = os.path.join(self.backup_dir, meta.get("weights", "latest.weights.h5"))
        if not os.path.exists(weights):
            return None
        return weights, int(meta["epoch"]), int(meta.get("sequence", 0))

    def on_train_begin(self, logs=None):
        if not self.model.built:
            raise ValueError(
                "To use the BackupAndRestore callback, your model must be built before you call fit(). "
                f"Model {self.model.name} is unbuilt; build it by calling it on a batch of data."
            )
        state.build_optimizer(self.model)
        info = np.zeros((2,), np.int64)
        if basics.rank() == self.root_rank:
            backup = self._read_backup()
            if backup is not None:
                weights, epoch, self._sequence = backup
                self.model.load_weights(weights)
                info[:] = (1, epoch)
        if basics.size() > 1:
            info = ops.broadcast(info, self.root_rank, name="tfring.keras.backup_and_restore.info")
        if info[0]:
            state.broadcast_model_state(self.model, self.root_rank, name="tfring.keras.backup_and_restore.state")
            self.model._initial_epoch = int(info[1])

    def on_epoch_end(self, epoch, logs=None):
        self._current_epoch = epoch + 1
        self._last_batch = None
        if self.save_freq == "epoch":
            self._save(batch=0)

    def on_train_batch_end(self, batch, logs=None):
        if self.save_freq == "epoch":
            return
        if self._last_batch is None or batch <= self._last_batch:
            self._batches_since_save += batch + 1
        else:
            self._batches_since_save += batch - self._last_batch
        self._last_batch = batch
        if self._batches_since_save >= self.save_freq:
            self._batches_since_save = 0
            self._save(batch=batch)

    def _save(self, batch):
        with coordination.coordinated_save(
                os.path.join(self.backup_dir, "<BackupAndRestore>"), "tfring.keras.callbacks.BackupAndRestore backup",
                writer=self.root_rank) as role:
            if _writes_here(role, self.root_rank):
                self._write_backup(batch)

    def _write_backup(self, batch):
        self._sequence += 1
        name = f"backup-{self._sequence}.weights.h5"
        os.makedirs(self.backup_dir, exist_ok=True)
        save_model_atomically(self.model, os.path.join(self.backup_dir, name), weights_only=True)
        meta = {"epoch": self._current_epoch, "batch": batch, "weights": name, "sequence": self._sequence}

        def write_meta(tmp):
            with open(tmp, "w") as f:
                json.dump(meta, f)

        atomic_write(self._metadata_path, write_meta)
        for entry in os.listdir(self.backup_dir):
            if entry.startswith("backup-") and entry.endswith(".weights.h5") and entry != name:
                try:
                    os.remove(os.path.join(self.backup_dir, entry))
                except OSError:
                    pass

    def on_train_end(self, logs=None):
        if not self.delete_checkpoint:
            return
        with coordination.coordinated_save(
                os.path.join(self.backup_dir, "<BackupAndRestore>"), "tfring.keras.callbacks.BackupAndRestore removal",
                writer=self.root_rank) as role:
            if _writes_here(role, self.root_rank) and os.path.exists(self.backup_dir):
                shutil.rmtree(self.backup_dir, ignore_errors=True)
