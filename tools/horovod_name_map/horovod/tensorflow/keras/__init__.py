"""``horovod.tensorflow.keras`` -> ``tfring.keras``: every public name, unchanged."""

import tfring.keras as _tfring_keras
from tfring.keras import *

for _name in dir(_tfring_keras):
    if not _name.startswith("__"):
        globals()[_name] = getattr(_tfring_keras, _name)
