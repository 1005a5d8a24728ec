"""Horovod's tf.data compute service API (``horovod.tensorflow.data.compute_service``) on
TensorFlow's own ``tf.data.experimental.service``: a separate tfring job of compute ranks
runs tf.data dispatchers and workers; training ranks send their input pipeline there.

    # the compute job (rank 0 writes the config file; every rank runs a tf.data worker)
    tfringrun -np 2 python -m tfring.tensorflow.data.compute_worker /shared/compute.json
    # the training job
    config = TfDataServiceConfig.read("/shared/compute.json", wait_for_file_creation=True)
    ds = ds.send_to_data_service(config, tfring.rank(), tfring.size())      # or:
    with tf_data_service(config, tfring.rank()) as address:
        ds = ds.apply(tf.data.experimental.service.distribute("distributed_epoch", address))
    ...
    config.compute_client().shutdown()                                       # stops the compute job

The dispatcher runs on the compute side (``dispatcher_side='compute'``: compute rank 0 of
each group of ``workers_per_dispatcher``) or on the training side (``'training'``: training
rank 0, or every training rank when there are several dispatchers, starts one in
``tf_data_service``). With ``processing_mode='distributed_epoch'`` each element goes to one
training rank: every rank gets its share. Importing this module adds
``tf.data.Dataset.send_to_data_service`` (as Horovod's does).

Blocking: ``tf_data_service`` and ``send_to_data_service`` wait up to ``config.timeout``
seconds for the dispatcher and its workers, then raise ``TimeoutError`` naming what is missing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import time
from collections.abc import Mapping, Sequence

import tensorflow as tf

from tfring._tensorflow.data.compute_client import CONNECT_TIMEOUT_S, ComputeClient, stop_note

FILE_POLL_S = 0.2
SIDES = ("compute", "training")


@dataclasses.dataclass(frozen=True)
class TfDataServiceConfig:
    """Where the compute job's registry is and how its dispatchers are laid out.

    Attributes:
      dispatchers: number of dispatchers (1, or one per training rank).
      workers_per_dispatcher: compute ranks (tf.data workers) per dispatcher.
      dispatcher_side: ``"compute"`` or ``"training"``.
      addresses: ``{"store": [(host, port)]}``: the registry (compute rank 0's store).
      key: the registry's secret (bytes).
      timeout: seconds every wait for a dispatcher or worker may take.
      source: the file ``read`` read it from (None otherwise; not written to the file),
        named by ``compute_client()``'s errors.
    """

    dispatchers: int
    workers_per_dispatcher: int
    dispatcher_side: str
    addresses: Mapping[str, Sequence[tuple]]
    key: bytes
    timeout: int = 60
    source: str | None = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self):
        if self.dispatcher_side not in SIDES:
            raise ValueError(f"dispatcher_side must be 'compute' or 'training'. Received: {self.dispatcher_side!r}")

    def compute_client(self, verbose=1):
        """A ``ComputeClient`` of the registry. Tries to connect for up to 30 s (at most
        ``timeout``); its error names the registry's address, the config file, and why the
        compute job stopped when it recorded that (compute_client.stop_note)."""
        (address, *_) = next(iter(self.addresses.values()))
        return ComputeClient(address, self.key, verbose=verbose, source=self.source,
                             timeout=min(CONNECT_TIMEOUT_S, float(self.timeout)))

    def to_dict(self):
        out = dataclasses.asdict(self)
        del out["source"]
        out["key"] = self.key.decode() if isinstance(self.key, bytes) else self.key
        out["addresses"] = {k: [list(a) for a in v] for k, v in self.addresses.items()}
        return out

    @staticmethod
    def from_dict(config):
        config = dict(config)
        key = config["key"]
        return TfDataServiceConfig(
            dispatchers=int(config["dispatchers"]),
            workers_per_dispatcher=int(config["workers_per_dispatcher"]),
            dispatcher_side=config["dispatcher_side"],
            addresses={k: [(a[0], int(a[1])) for a in v] for k, v in config["addresses"].items()},
            key=key.encode() if isinstance(key, str) else key,
            timeout=config.get("timeout") or 60)

    def write(self, filename):
        """Writes the config as JSON, atomically (a reader never sees half a file). The file
        holds the registry's secret: it is created readable by its owner only."""
        tmp = f"{filename}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(self.to_dict(), f)
        os.replace(tmp, filename)

    @staticmethod
    def read(filename, wait_for_file_creation=False, timeout=None):
        """Reads a config file; with ``wait_for_file_creation``, waits for it (at most
        ``timeout`` seconds when given)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while wait_for_file_creation and not os.path.exists(filename):
            if deadline is not None and time.monotonic() >= deadline:
                note = stop_note(filename)
                raise TimeoutError(f"{filename} did not appear within {timeout} s: start the compute job "
                                   f"(tfringrun -np N python -m tfring.tensorflow.data.compute_worker {filename})"
                                   + (f"; the last one to use this file: {note}" if note else ""))
            time.sleep(FILE_POLL_S)
        with open(filename) as f:
            return dataclasses.replace(TfDataServiceConfig.from_dict(json.load(f)), source=filename)


def _dispatcher_index(config, rank):
    return rank if config.dispatchers > 1 else 0


@contextlib.contextmanager
def tf_data_service(compute_config, rank):
    """Yields the dispatcher address (``grpc://host:port``) for training rank ``rank``.

    With ``dispatcher_side='training'`` this rank starts the dispatcher (rank 0 for one
    dispatcher, every rank for several) and stops it on exit. Waits until the dispatcher
    and all its workers have registered (``compute_config.timeout``).
    """
    compute = compute_config.compute_client()
    server = None
    index = _dispatcher_index(compute_config, rank)
    if compute_config.dispatcher_side == "training" and (compute_config.dispatchers > 1 or rank == 0):
        server = tf.data.experimental.service.DispatchServer()
        compute.register_dispatcher(index, server.target)
    try:
        address = compute.wait_for_dispatcher_registration(index, compute_config.timeout)
        compute.wait_for_dispatcher_worker_registration(index, compute_config.workers_per_dispatcher,
                                                        compute_config.timeout)
        yield address
    finally:
        if server is not None:
            server.stop()


def _shared_job_name():
    """The tf.data job name the ranks of this training job share for their n-th dataset:
    the same on every rank (same launcher store, same call order), and never that of
    another training job or dataset on the same dispatcher (Horovod uses 'job' for all,
    so a second dataset with other element types fails there)."""
    return f"tfring-{os.environ.get('TFRING_STORE_ADDR', 'job')}-{next(_datasets)}"


_datasets = itertools.count()


def send_to_data_service(dataset, compute_config, rank, size=None, reuse_dataset=False, round_robin=False):
    """``dataset`` processed by the compute job's tf.data workers for training rank ``rank``
    (``distributed_epoch``: each element once per tf.data job). Without ``reuse_dataset``
    each rank has its own job (the whole dataset); with it the ranks share one job, each
    getting its share first-come-first-served, or in turn with ``round_robin`` (needs ``size``).
    Only for ``dispatcher_side='compute'`` (a training-side dispatcher must outlive the
    dataset: use ``tf_data_service``)."""
    if compute_config.dispatcher_side == "training":
        raise RuntimeError("send_to_data_service needs dispatcher_side='compute': with a training-side dispatcher "
                           "use `with tf_data_service(config, rank) as address:` around the training")
    if reuse_dataset and round_robin and size is None:
        raise ValueError("send_to_data_service(round_robin=True) needs size (the number of training ranks)")
    with tf_data_service(compute_config, rank) as address:
        return dataset.apply(tf.data.experimental.service.distribute(
            processing_mode="distributed_epoch", service=address,
            job_name=_shared_job_name() if reuse_dataset else None,
            consumer_index=rank if reuse_dataset and round_robin else None,
            num_consumers=size if reuse_dataset and round_robin else None))


tf.data.Dataset.send_to_data_service = send_to_data_service


def _gave_up(config, index, group):
    """Why compute rank ``index`` stops when dispatcher ``group`` never registered."""
    if config.dispatcher_side == "training":
        who = f"with dispatcher_side='training', training rank {group} starts it in tf_data_service() (is the " \
              "training job running?)"
    else:
        who = f"compute rank {group * config.workers_per_dispatcher} starts it (see its output)"
    return f"compute rank {index} gave up waiting for tf.data dispatcher {group} after {config.timeout} s: {who}"


def compute_worker_fn(compute_config, timeout=None):
    """Runs on every rank of the compute job: starts this rank's tf.data worker (and, with
    ``dispatcher_side='compute'``, the group's dispatcher on its first rank), registers
    them, and serves until ``ComputeClient.shutdown()``. Rank and size come from tfringrun
    (TFRING_RANK / TFRING_SIZE)."""
    from tfring._tensorflow.data import compute_rank

    index = compute_rank.rank_and_size()[0]
    group = index // compute_config.workers_per_dispatcher
    compute = compute_config.compute_client()
    dispatcher = None
    if compute_config.dispatcher_side == "compute" and index % compute_config.workers_per_dispatcher == 0:
        dispatcher = tf.data.experimental.service.DispatchServer()
        compute.register_dispatcher(group, dispatcher.target)
    try:
        try:
            address = compute.wait_for_dispatcher_registration(group, compute_config.timeout)
        except TimeoutError as e:
            raise TimeoutError(_gave_up(compute_config, index, group)) from e
        host = compute_rank.this_host()
        worker = tf.data.experimental.service.WorkerServer(tf.data.experimental.service.WorkerConfig(
            dispatcher_address=address.split("://", 1)[-1], worker_address=f"{host}:%port%",
            heartbeat_interval_ms=1000, dispatcher_timeout_ms=int(timeout * 1000) if timeout else None))
        try:
            compute.register_worker_for_dispatcher(group, index)
            compute.wait_for_shutdown()
        finally:
            worker.stop()
    finally:
        if dispatcher is not None:
            dispatcher.stop()
