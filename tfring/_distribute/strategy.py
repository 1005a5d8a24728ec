"""``tfring.RingStrategy``: a ``tf.distribute.Strategy`` whose collectives are tfring's."""

import tensorflow as tf

from tfring import _private_api
from tfring._basics import basics
from tfring._bootstrap import launch_env
from tfring._distribute import keras_integration, save_hooks
from tfring._distribute.extended import RingExtended
from tfring._tensorflow import gradients as _gradients  # noqa: F401 - registers the ops' gradients


class RingStrategy(_private_api.Strategy):
    """Synchronous data parallelism over tfring processes: one replica per process.

    Start one process per replica with ``tfringrun -np N python train.py``; every process
    builds the same strategy. ``num_replicas_in_sync`` is the world size and a replica's
    ``replica_id_in_sync_group`` its rank.

    Batch sizes are GLOBAL, as with every ``tf.distribute`` strategy: a dataset batched by B
    gives each rank B / size rows, so 2 processes with batch B train like 1 process with
    batch B. (``tfring.keras.DistributedOptimizer`` is the other model: each worker's batch
    is its own and the global batch is B x size.)

    Under ``with strategy.scope():`` create the model AND the optimizer; then ``model.fit``,
    ``evaluate`` and ``predict`` work unchanged and return global results on every rank.
    Custom loops use ``strategy.run``, ``reduce``, ``gather``,
    ``experimental_distribute_dataset``, ``distribute_datasets_from_function`` and the
    replica context's ``all_reduce`` / ``all_gather``, exactly as with
    ``MirroredStrategy``.

    Every cross-rank reduction is a tfring collective (gradients in one grouped allreduce,
    fused by the core). Variables created under the scope start equal on every rank
    (rank 0's initial values), and stay equal; see ``docs/strategy.md`` for checkpoints.

    Args:
      device: the device of this process's replica. Default: ``/gpu:0`` when this process
        sees exactly one GPU, ``/gpu:<local_rank>`` when it sees several, else ``/cpu:0``.

    Raises:
      tfring.distribute.PrivateApiError: the installed TensorFlow/Keras changed a private
        API the strategy relies on (the message names it).

    Example:
      ```python
      strategy = tfring.RingStrategy()
      with strategy.scope():
          model = make_model()
          model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
      model.fit(x, y, batch_size=64 * strategy.num_replicas_in_sync)
      ```
    """

    def __init__(self, device=None):
        _private_api.check_private_apis()
        if launch_env.elastic_worker_id() is not None:
            from tfring._errors import UnimplementedError

            raise UnimplementedError(
                "RingStrategy cannot run in an elastic job (tfringrun --min-np/--max-np/--host-discovery-script): "
                "its replica count and rank are fixed when it is created, and an elastic job changes them. Use "
                "tfring.keras.DistributedOptimizer with tfring.keras.elastic (docs/elastic.md), or start the job "
                "without the elastic flags")
        basics.init()  # no-op when already initialized
        self._rank = basics.rank()
        self._size = basics.size()
        extended = RingExtended(self, device or _default_device(basics.local_rank()), self._rank, self._size)
        super().__init__(extended)
        keras_integration.install(RingStrategy)
        save_hooks.install()

    def __repr__(self):
        return f"RingStrategy(rank={self._rank}, size={self._size}, device={self.extended._device!r})"


def _default_device(local_rank):
    gpus = tf.config.list_logical_devices("GPU")
    if not gpus:
        return "/cpu:0"
    if len(gpus) == 1:
        return "/gpu:0"
    return f"/gpu:{local_rank % len(gpus)}"
