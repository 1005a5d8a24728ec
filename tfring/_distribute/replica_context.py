"""The replica context inside ``RingStrategy.run``: one replica per process, whose id in
the sync group is this process's rank.

``all_reduce`` / ``all_gather`` / ``merge_call`` are TF's (they call the strategy's
``batch_reduce_to`` / ``_gather_to``, i.e. tfring collectives). Entering the context also
makes ``tf.summary`` record only where ``replica_id_in_sync_group == 0``: rank 0.
"""

from tfring import _private_api


class RingReplicaContext(_private_api.ReplicaContext):
    def __init__(self, strategy, rank):
        _private_api.ReplicaContext.__init__(self, strategy, replica_id_in_sync_group=rank)

    @property
    def devices(self):
        return self._strategy.extended.worker_devices
