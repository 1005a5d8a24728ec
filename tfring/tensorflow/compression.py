"""Gradient compression during allreduce (Horovod's ``horovod.tensorflow.compression``;
``hvd.Compression``). A face: the implementation is tfring/_tensorflow/compression.py.
"""

from tfring._api.binding import bind as _bind

__getattr__, __dir__ = _bind(globals())  # the names of tfring.tensorflow.compression in tfring/_api/exports.py
