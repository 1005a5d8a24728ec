"""Datasets under RingStrategy: the batch size you give is GLOBAL.

``experimental_distribute_dataset(dataset)`` (also what ``model.fit`` / ``evaluate`` /
``predict`` call): ``dataset`` yields global batches of B rows; this rank receives B/size
of them -- rank r the r-th slice of every global batch -- by TF's own rebatch and
auto-shard (``MultiWorkerMirroredStrategy``'s path, with this process as input pipeline
``rank`` of ``size``). With ``AutoShardPolicy.AUTO`` a dataset read from several files is
sharded by file where possible, otherwise by data; ``OFF`` leaves sharding to you.

For the split to be an exact partition every rank must produce the same global batches in
the same order: shuffle with the same seed on every rank (``keras.utils.set_random_seed``
or ``dataset.shuffle(n, seed=...)``; ``model.fit(shuffle=True)`` on arrays needs the
former). When B is not a multiple of the size, or the last batch is partial, ranks get
slices of different lengths (possibly empty); every rank still runs the same number of
steps.

``distribute_datasets_from_function(dataset_fn)`` calls ``dataset_fn`` with
``tf.distribute.InputContext(num_input_pipelines=size, input_pipeline_id=rank,
num_replicas_in_sync=size)``: shard and batch it yourself
(``ctx.get_per_replica_batch_size(global_batch)``), and make every rank yield the same
number of batches.

Both return a plain ``tf.data.Dataset`` of this rank's batches rather than a
``tf.distribute.DistributedDataset``: with one replica per process there is nothing left to
split, and iterating a DistributedIterator costs ~1.4 ms of Python per Keras step (measured
on TF 2.21; a whole small-model step costs ~1.1 ms). Its elements are plain tensors, as
with ``OneDeviceStrategy``. A dataset returned here is recognized when given back
(``model.fit(strategy.experimental_distribute_dataset(ds))``) and not split again.
"""

import weakref

import tensorflow as tf

from tfring import _private_api

_rank_shards = weakref.WeakSet()  # datasets already holding this rank's batches


def input_context(rank, size):
    return _private_api.InputContext(num_input_pipelines=size, input_pipeline_id=rank, num_replicas_in_sync=size)


def _check_replication_mode(options, what):
    if options is not None and options.experimental_replication_mode == tf.distribute.InputReplicationMode.PER_REPLICA:
        raise NotImplementedError(
            f"RingStrategy.{what} supports InputReplicationMode.PER_WORKER only (one replica per "
            "process: the worker is the replica)."
        )


def _rank_shard(dataset):
    _rank_shards.add(dataset)
    return dataset


def distribute_dataset(extended, dataset, options, rank, size):
    _check_replication_mode(options, "experimental_distribute_dataset")
    if dataset in _rank_shards:
        return dataset
    if size > 1:
        batches = int(dataset.cardinality())
        distributed = _private_api.get_distributed_dataset(
            dataset,
            extended._input_workers_with_options(options),
            extended._container_strategy(),
            num_replicas_in_sync=size,
            input_context=input_context(rank, size),
            options=options,
        )
        dataset = _private_api.single_worker_dataset(distributed)
        if batches >= 0:
            # A slice of every global batch: as many batches as the global dataset (TF cannot
            # infer it through the shard, and Keras warns on every epoch without it). Known
            # counts come from in-memory sources, which are sharded by data, never by file.
            dataset = dataset.apply(tf.data.experimental.assert_cardinality(batches))
    return _rank_shard(dataset)


def distribute_datasets_from_function(dataset_fn, options, rank, size):
    _check_replication_mode(options, "distribute_datasets_from_function")
    dataset = dataset_fn(input_context(rank, size))
    if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(f"The dataset_fn given to RingStrategy.distribute_datasets_from_function must return a "
                        f"tf.data.Dataset. Received: {type(dataset).__name__}")
    return _rank_shard(dataset)
