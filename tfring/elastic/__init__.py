"""Elastic training, framework-neutral part: the rendezvous protocol with the driver
(``tfringrun --min-np/--max-np/--host-discovery-script``), the state base classes and the
``run`` wrapper. TensorFlow users import ``tfring.tensorflow.elastic`` or
``tfring.keras.elastic``; docs/elastic.md has the user's view.
"""

from tfring.elastic.exceptions import HorovodInternalError, HostsUpdatedInterrupt, JobEndedError
from tfring.elastic.run import lost_job_member, reset, run_fn
from tfring.elastic.state import ObjectState, State

__all__ = [
    "HorovodInternalError",
    "HostsUpdatedInterrupt",
    "JobEndedError",
    "ObjectState",
    "State",
    "lost_job_member",
    "reset",
    "run_fn",
]
