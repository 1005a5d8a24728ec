"""XLA and tfring's collectives: ``cuda_handler_status()`` (why the XLA:GPU handlers are not
registered, or ""), ``in_xla_context()`` and ``XlaCompilationError`` (docs/tensorflow.md,
"XLA"). A face: the implementation is tfring/_tensorflow/xla.py.
"""

from tfring._api.binding import bind as _bind

__getattr__, __dir__ = _bind(globals())  # the names of tfring.tensorflow.xla in tfring/_api/exports.py
