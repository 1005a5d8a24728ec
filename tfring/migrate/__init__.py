"""``tfring-migrate``: rewrites the mechanical edits that move a Horovod, Keras 2 or
MultiWorkerMirroredStrategy script to tfring and Keras 3, and lists the rest with the fix.

    tfring-migrate train.py run.sh       # a unified diff, and the manual edits left
    tfring-migrate --write train.py      # change the files in place

docs/migrating.md explains every edit. A face for the console script: the implementation
is tfring/_migrate/.
"""

from tfring._api.binding import bind as _bind

__getattr__, __dir__ = _bind(globals())  # the names of tfring.migrate in tfring/_api/exports.py
