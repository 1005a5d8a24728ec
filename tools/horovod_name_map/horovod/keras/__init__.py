"""``horovod.keras`` -> ``tfring.keras`` (Horovod's Keras 2 module; under Keras 3 both names
are the same module): every public name, unchanged."""

from horovod.tensorflow.keras import *
from horovod.tensorflow.keras import _tfring_keras

for _name in dir(_tfring_keras):
    if not _name.startswith("__"):
        globals()[_name] = getattr(_tfring_keras, _name)
