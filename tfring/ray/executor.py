"""``RayExecutor``: a tfring job on plain Ray actors, shaped like Horovod's RayExecutor.

    executor = RayExecutor(num_workers=4, cpus_per_worker=1)
    executor.start()
    results = executor.run(train_fn, args=[config])   # one result per rank, rank order
    executor.shutdown()

The driver serves the store; each actor gets its ``TFRING_*`` environment, and the
function calls ``hvd.init()`` itself, as under Horovod. A function that raises tells the
other ranks why (their collectives fail naming the rank); ``run`` then raises Ray's error.
Blocking calls (``start``, ``run``, ``execute``) wait on ``ray.get``, whose waits end when a
worker fails or tfring's own timeouts fire (docs/configuration.md).
"""

import ray

from tfring.ray import job


@ray.remote
class _Worker:
    """One rank. Holds the optional user object ``execute`` works on."""

    def __init__(self):
        self.executable = None

    def node_ip(self):
        return job.node_ip()

    def set_env(self, env):
        job.set_env(env)

    def start_executable(self, cls, args, kwargs):
        if cls is not None:
            self.executable = cls(*args, **kwargs)

    def execute(self, fn):
        return job.call_as_rank(fn, self.executable)

    def run(self, fn, args, kwargs):
        return job.call_as_rank(fn, *args, **kwargs)


class RayExecutor:
    """N Ray actors forming one tfring job.

    Args:
      settings: tfring settings for every worker (as ``TfringConfig.settings``).
      num_workers: ranks (actors).
      cpus_per_worker, use_gpu, gpus_per_worker: each actor's Ray resources
        (``gpus_per_worker`` defaults to 1 with ``use_gpu``).
    """

    def __init__(self, settings=None, num_workers=1, cpus_per_worker=1, use_gpu=False, gpus_per_worker=None):
        if num_workers < 1:
            raise ValueError(f"RayExecutor needs num_workers >= 1. Received: {num_workers}")
        self.settings = dict(settings or {})
        self.num_workers = num_workers
        self.cpus_per_worker = cpus_per_worker
        self.gpus_per_worker = (gpus_per_worker or 1) if use_gpu else 0
        self.workers = []
        self._store = None

    def start(self, executable_cls=None, executable_args=None, executable_kwargs=None, extra_env_vars=None):
        """Starts the actors and gives each its environment (plus ``extra_env_vars``);
        with ``executable_cls``, each builds ``executable_cls(*args, **kwargs)`` for
        ``execute``. Blocking."""
        if self.workers:
            raise RuntimeError("RayExecutor.start() was already called; call shutdown() first")
        job.check_ray_version()
        options = {"num_cpus": self.cpus_per_worker, "num_gpus": self.gpus_per_worker}
        self.workers = [_Worker.options(**options).remote() for _ in range(self.num_workers)]
        node_ips = ray.get([w.node_ip.remote() for w in self.workers])
        self._store = job.start_store()
        envs = job.worker_envs(node_ips, self._store, self.settings)
        ray.get([w.set_env.remote({**env, **(extra_env_vars or {})}) for w, env in zip(self.workers, envs)])
        ray.get([w.start_executable.remote(executable_cls, list(executable_args or []), dict(executable_kwargs or {}))
                 for w in self.workers])

    def run_remote(self, fn, args=None, kwargs=None):
        """``fn(*args, **kwargs)`` on every rank; a list of ``ObjectRef``, by rank."""
        self._check_started()
        return [w.run.remote(fn, list(args or []), dict(kwargs or {})) for w in self.workers]

    def run(self, fn, args=None, kwargs=None):
        """``fn(*args, **kwargs)`` on every rank; its results, by rank. Blocking."""
        return ray.get(self.run_remote(fn, args, kwargs))

    def execute(self, fn):
        """``fn(executable)`` on every rank (the object ``start`` built, or None); results
        by rank. Blocking."""
        self._check_started()
        return ray.get([w.execute.remote(fn) for w in self.workers])

    def execute_single(self, fn):
        """``fn(executable)`` on rank 0 only. Blocking."""
        self._check_started()
        return ray.get(self.workers[0].execute.remote(fn))

    def shutdown(self):
        """Kills the actors and stops the store. Idempotent."""
        for w in self.workers:
            ray.kill(w)
        self.workers = []
        if self._store is not None:
            self._store.stop()
            self._store = None

    def _check_started(self):
        if not self.workers:
            raise RuntimeError("RayExecutor is not started: call start() first")
