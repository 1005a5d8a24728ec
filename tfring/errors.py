"""Exceptions raised by tfring's Python API, one per core error code (``tfring.errors.TimeoutError``,
``PeerLostError``, ...). Each also derives from the closest Python built-in, so ``except
ValueError`` and ``except TimeoutError`` keep working. A face: the classes are in
tfring/_errors.py.
"""

from tfring._api.binding import bind as _bind

__getattr__, __dir__ = _bind(globals())  # the names of tfring.errors in tfring/_api/exports.py
