"""Elastic training, framework-neutral part: the rendezvous protocol with the driver
(``tfringrun --min-np/--max-np/--host-discovery-script``), the state base classes and the
``run`` wrapper. TensorFlow users import ``tfring.tensorflow.elastic`` or
``tfring.keras.elastic``; docs/elastic.md has the user's view. A face: the implementation
is tfring/_elastic/.
"""

from tfring._api.binding import bind as _bind

__getattr__, __dir__ = _bind(globals())  # the names of tfring.elastic in tfring/_api/exports.py
