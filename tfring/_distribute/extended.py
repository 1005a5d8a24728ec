"""``RingExtended``: the ``strategy.extended`` of RingStrategy.

One replica per process, on one device; the ``size`` processes form the sync group and
``replica_id_in_sync_group`` is the rank. Built on ``OneDeviceExtended`` (device placement,
``update``, iterators), overriding only what crosses ranks: the replica count and id,
reductions and gathers (tfring collectives, see ``cross_rank``), dataset distribution
(``input``), variable creation (``variables``) and ``run`` (replica context).

``_in_multi_worker_mode()`` stays False: True would make TF wrap every batch in
``PerReplica`` values, which Keras' ``fit`` cannot consume for a one-device worker. The
roles TF's multi-worker code asks about answer as ``MultiWorkerMirroredStrategy``'s do for
a cluster of workers only, with worker = rank: ``strategy.cluster_resolver`` (a
``RingClusterResolver``), ``should_checkpoint`` / ``should_save_summary`` (the chief,
rank 0), ``experimental_should_init`` (every rank initializes its own variables).
"""

import tensorflow as tf

from tfring import _private_api
from tfring._distribute import cross_rank, datasets, variables
from tfring._distribute.cluster_resolver import RingClusterResolver
from tfring._distribute.replica_context import RingReplicaContext
from tfring._tensorflow import (
    grad_reduction,
    gradients,  # noqa: F401 - registers the ops' gradients
)


class RingExtended(_private_api.OneDeviceExtended):
    def __init__(self, container_strategy, device, rank, size):
        super().__init__(container_strategy, device)
        self._rank = int(rank)
        self._size = int(size)
        # read by tf.distribute.Strategy.cluster_resolver; _is_chief as MultiWorkerMirroredStrategy's extended
        self._cluster_resolver = RingClusterResolver(
            self._rank, self._size, {"GPU": 1} if tf.DeviceSpec.from_string(device).device_type == "GPU" else {})
        self._is_chief = self._cluster_resolver.is_chief

    # -- the sync group --------------------------------------------------------------------
    @property
    def _num_replicas_in_sync(self):
        return self._size

    def _get_local_replica_id(self, replica_id_in_sync_group):
        return 0

    def _get_replica_id_in_sync_group(self, replica_id):
        return self._rank

    @property
    def experimental_between_graph(self):
        return True

    @property
    def experimental_should_init(self):
        """Every rank initializes its variables (then broadcast from rank 0 at creation)."""
        return True

    @property
    def should_checkpoint(self):
        """Only the chief, rank 0, writes checkpoints (every rank holds the same variables)."""
        return self._is_chief

    @property
    def should_save_summary(self):
        """Only the chief, rank 0, writes summaries."""
        return self._is_chief

    # -- strategy.run ------------------------------------------------------------------------
    def _call_for_each_replica(self, fn, args, kwargs):
        with tf.device(self._device), RingReplicaContext(self._container_strategy(), self._rank):
            return fn(*args, **kwargs)

    # -- reductions --------------------------------------------------------------------------
    def _reduce_to(self, reduce_op, value, destinations, options):
        del destinations, options
        return cross_rank.all_reduce([value], reduce_op, kind="reduce")[0]

    def _batch_reduce_to(self, reduce_op, value_destination_pairs, options):
        del options
        values = [value for value, _ in value_destination_pairs]
        # batch_reduce_to is how Keras' optimizer reduces gradients: bucketed for overlap
        return cross_rank.all_reduce(values, reduce_op, kind="batch_reduce", bucket_bytes=grad_reduction.DEFAULT_BUCKET_BYTES)

    def _gather_to_implementation(self, value, destinations, axis, options):
        del destinations, options
        return cross_rank.all_gather(value, axis)

    # -- variables ---------------------------------------------------------------------------
    def _create_variable(self, next_creator, **kwargs):
        def placed_creator(**kw):
            return super(RingExtended, self)._create_variable(next_creator, **kw)

        return variables.create_variable(placed_creator, self._rank, self._size, **kwargs)

    # -- input -------------------------------------------------------------------------------
    def _experimental_distribute_dataset(self, dataset, options):
        return datasets.distribute_dataset(self, dataset, options, self._rank, self._size)

    def _distribute_datasets_from_function(self, dataset_fn, options):
        return datasets.distribute_datasets_from_function(dataset_fn, options, self._rank, self._size)

    def _experimental_distribute_values_from_function(self, value_fn):
        return value_fn(_private_api.ValueContext(self._rank, self._size))
