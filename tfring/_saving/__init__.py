"""The implementation of ``tfring.saving`` (private; the face binds its names from
tfring/_api/exports.py). The saving layer: above tfring/_tensorflow, below tfring/_keras.

Checkpoints that every rank asks for, written once (by rank 0), atomically.

* ``coordination``: who writes, how the other ranks wait (``local_save()`` opts out).
* ``atomic``: temporary name, fsync, rename (TF checkpoints: index last).
* ``job_store``: this process's connection to the job's store.
* ``writer_error``: the writer's failure, raised again (same class, same message) on the
  ranks that waited for it.

The hooks that route Keras and TensorFlow saves through here are installed by
``tfring.RingStrategy`` (``tfring._distribute.save_hooks``); ``tfring.keras.callbacks``
use this package directly. See docs/strategy.md, "Checkpoints".
"""
