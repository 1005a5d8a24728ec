"""tfring as a Ray Train (V2) backend: ``TfringConfig`` and ``TfringTrainer``.

``TfringTrainer(train_fn, scaling_config=..., tfring_config=TfringConfig(...))`` is a
``ray.train.v2`` ``DataParallelTrainer`` whose workers form one tfring job:

* ``on_start`` (in Ray Train's controller): the controller serves the job's store; each
  worker gets its ``TFRING_*`` identity (rank = Ray's world rank, local ranks grouped by
  node IP) and the store's address and secret.
* every worker runs ``tfring.init()`` (with ``TfringConfig.settings``), then the user's
  function; when it raises, ``tfring.shutdown(reason)`` tells the other ranks, whose
  collectives fail naming the rank instead of waiting for a timeout; Ray then fails the
  run (or restarts it, with ``FailureConfig(max_failures=...)``, on a fresh store).
* ``on_shutdown``: the store stops.

Blocking: ``fit()`` as in Ray. Thread-safety: the backend is a Ray singleton; it keeps one
store per worker group.
"""

import dataclasses
import inspect

from ray.train.backend import Backend, BackendConfig
from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

from tfring._engines.ray import job


@dataclasses.dataclass
class TfringConfig(BackendConfig):
    """How the workers' tfring job is set up.

    Attributes:
      settings: tfring settings for every worker, by lower-case name without the prefix
        (``{"fusion_threshold": 1 << 20, "timeout_s": 60}``) or by variable name; see
        docs/configuration.md.
    """

    settings: dict = dataclasses.field(default_factory=dict)

    @property
    def backend_cls(self):
        return _TfringBackend

    def to_dict(self):
        return {"settings": dict(self.settings)}


class _TfringBackend(Backend):
    def __init__(self):
        self._stores = {}  # id(worker group) -> Store

    def on_start(self, worker_group, backend_config):
        job.check_ray_version()
        node_ips = worker_group.execute(job.node_ip)
        store = job.start_store()
        self._stores[id(worker_group)] = store
        envs = job.worker_envs(node_ips, store, backend_config.settings)
        import ray

        ray.get([worker_group.execute_single_async(rank, job.set_env, env) for rank, env in enumerate(envs)])

    def on_shutdown(self, worker_group, backend_config):
        store = self._stores.pop(id(worker_group), None)
        if store is not None:
            store.stop()


def _as_tfring_job(train_fn):
    """``train_fn`` with ``tfring.init()`` before it and the reason-giving shutdown after,
    with the same arity (Ray passes ``train_loop_config`` to one-argument functions)."""
    takes_config = len(inspect.signature(train_fn).parameters) > 0

    def run(*args):
        from tfring._basics import basics

        basics.init()
        try:
            return job.call_as_rank(train_fn, *args)
        finally:
            basics.shutdown()

    if takes_config:
        def train_loop(config):
            return run(config)
    else:
        def train_loop():
            return run()
    train_loop.__name__ = getattr(train_fn, "__name__", "train_loop")
    train_loop.__doc__ = train_fn.__doc__
    return train_loop


class TfringTrainer(DataParallelTrainer):
    """A Ray Train data-parallel trainer whose workers are the ranks of a tfring job.

    Args:
      train_loop_per_worker: the training function (no argument, or one: the
        ``train_loop_config``). tfring is initialized when it starts: use
        ``tfring.keras``/``tfring.tensorflow``/``RingStrategy`` as under tfringrun.
      tfring_config: a ``TfringConfig`` (default: no extra settings).
      **kwargs: the other ``DataParallelTrainer`` arguments (``scaling_config``,
        ``run_config``, ``train_loop_config``, ``datasets``, ...).
    """

    def __init__(self, train_loop_per_worker, *, tfring_config=None, **kwargs):
        if "backend_config" in kwargs:
            raise TypeError("TfringTrainer takes tfring_config=TfringConfig(...), not backend_config")
        super().__init__(_as_tfring_job(train_loop_per_worker), backend_config=tfring_config or TfringConfig(),
                         **kwargs)
