"""tfring for Keras 3 (``import tfring.keras as hvd``), Horovod's ``horovod.keras`` API.

Process basics, constants, process sets and the timeline come from ``tfring.tensorflow``;
``allreduce``, ``allgather``, ``broadcast`` and ``reducescatter`` take tensor-compatible
values and return tensors (``tf.Tensor`` when eager), and ``broadcast_global_variables``
is for ``tf.compat.v1`` graphs, as in ``horovod.tensorflow.keras`` (``collectives``).
"""

from tfring._api.binding import bind as _bind

__getattr__, __dir__ = _bind(globals())  # the names of tfring.keras in tfring/_api/exports.py
