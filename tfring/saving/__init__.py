"""Checkpoints that every rank asks for, written once (by rank 0), atomically: ``atomic_write``
and friends, ``coordinated_save``, ``local_save``. See docs/strategy.md, "Checkpoints".

A face: the implementation is tfring/_saving/.
"""

from tfring._api.binding import bind as _bind

__getattr__, __dir__ = _bind(globals())  # the names of tfring.saving in tfring/_api/exports.py
