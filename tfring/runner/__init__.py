"""The ``tfringrun`` launcher: ``tfringrun -np N [--] command...`` (docs/launcher.md).

A face: ``Store`` and ``rank_identities``, the API for other launchers, bound from
tfring/_api/exports.py; ``python -m tfring.runner.launch`` is the console script's module.
The implementation is tfring/_runner/.
"""

from tfring._api.binding import bind as _bind

__getattr__, __dir__ = _bind(globals())  # the names of tfring.runner in tfring/_api/exports.py
