"""``horovod.tensorflow`` -> ``tfring.tensorflow``: every public name, unchanged."""

import tfring.tensorflow as _tfring_tensorflow
from tfring.tensorflow import *

SyncBatchNormalization = _tfring_tensorflow.SyncBatchNormalization  # resolved lazily there
for _name in dir(_tfring_tensorflow):
    if not _name.startswith("__"):
        globals()[_name] = getattr(_tfring_tensorflow, _name)

from horovod.tensorflow import util as util  # horovod.tensorflow.util, as in Horovod
from horovod.tensorflow.util import _executing_eagerly as _executing_eagerly
