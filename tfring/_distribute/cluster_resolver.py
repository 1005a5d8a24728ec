"""``RingClusterResolver``: ``strategy.cluster_resolver`` of RingStrategy, answering from
tfring's rank and size as ``MultiWorkerMirroredStrategy``'s resolver answers from
``TF_CONFIG`` when it lists workers only.

Scripts written for ``MultiWorkerMirroredStrategy`` decide who writes from
``strategy.cluster_resolver.task_type`` / ``task_id`` (TF's multi-worker tutorials:
``task_type == "chief" or (task_type == "worker" and task_id == 0)``), or hand the
resolver's ``cluster_spec()`` to TF's ``multi_worker_util.is_chief``. With a ``TF_CONFIG``
of workers only, TF makes worker 0 the chief. Here: one ``"worker"`` task per rank,
``task_id`` = rank, so rank 0 is the chief everywhere TF asks.
"""

import tensorflow as tf

TASK_TYPE = "worker"


def placeholder_address(rank):
    """The address listed for ``rank`` in ``cluster_spec()``: a name under the reserved
    ``.invalid`` domain (RFC 2606), never resolvable. tfring's ranks talk through its own
    runtime, not through TF servers, so no TF server listens anywhere."""
    return f"rank{int(rank)}.tfring.invalid:0"


class RingClusterResolver(tf.distribute.cluster_resolver.ClusterResolver):
    """The cluster of a tfring job, as a ``tf.distribute.cluster_resolver.ClusterResolver``.

    Args:
      rank: this process's rank (its ``task_id``).
      size: the number of processes (one ``"worker"`` task each).
      num_accelerators: accelerators of this process's replica, e.g. ``{"GPU": 1}``;
        ``{}`` on a CPU replica.

    Raises:
      ValueError: ``rank`` is not in ``[0, size)``.

    Example:
      ```python
      resolver = strategy.cluster_resolver
      is_chief = resolver.task_type == "chief" or (resolver.task_type == "worker" and resolver.task_id == 0)
      ```
    """

    def __init__(self, rank, size, num_accelerators=None):
        rank, size = int(rank), int(size)
        if size < 1 or not 0 <= rank < size:
            raise ValueError(f"RingClusterResolver needs 0 <= rank < size. Received: rank={rank}, size={size}")
        self._rank = rank
        self._size = size
        self._num_accelerators = dict(num_accelerators or {})

    def cluster_spec(self):
        """``{"worker": [one placeholder address per rank]}`` (no ``"chief"`` job: worker 0
        is the chief, as TF decides for a cluster of workers only)."""
        return tf.train.ClusterSpec({TASK_TYPE: [placeholder_address(r) for r in range(self._size)]})

    def master(self, task_type=None, task_id=None, rpc_layer=None):
        """``""``: no TF server runs; every process executes its own graph in-process."""
        del task_type, task_id, rpc_layer
        return ""

    def num_accelerators(self, task_type=None, task_id=None, config_proto=None):
        """The accelerators of one worker's replica (every rank has one replica)."""
        del task_type, task_id, config_proto
        return dict(self._num_accelerators)

    @property
    def task_type(self):
        return TASK_TYPE

    @task_type.setter
    def task_type(self, value):
        raise AttributeError(f"RingClusterResolver.task_type is always {TASK_TYPE!r} (tfring sets the roles); "
                             f"received: {value!r}")

    @property
    def task_id(self):
        """This process's rank."""
        return self._rank

    @task_id.setter
    def task_id(self, value):
        raise AttributeError(f"RingClusterResolver.task_id is this process's rank ({self._rank}), set by tfringrun; "
                             f"received: {value!r}")

    @property
    def rpc_layer(self):
        return None

    @property
    def is_chief(self):
        """True on rank 0 (worker 0 of a cluster without a ``"chief"`` job)."""
        return self._rank == 0

    def __repr__(self):
        return f"RingClusterResolver(task_type={TASK_TYPE!r}, task_id={self._rank}, workers={self._size})"
