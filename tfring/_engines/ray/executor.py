"""``RayExecutor``: a tfring job on plain Ray actors, with Horovod 0.28's RayExecutor API.

    settings = RayExecutor.create_settings(timeout_s=30)      # as in Horovod
    executor = RayExecutor(settings, num_workers=4, cpus_per_worker=1)
    # or RayExecutor(settings, num_hosts=2, num_workers_per_host=2): 2 ranks on each of 2 nodes
    executor.start()
    results = executor.run(train_fn, args=[config])   # one result per rank, rank order
    executor.shutdown()

``settings`` may also be a dict of tfring settings (``{"fusion_threshold": ...}``, as
``TfringConfig.settings``). The driver serves the store; each actor gets its ``TFRING_*``
environment, and the function calls ``hvd.init()`` itself, as under Horovod. A function that
raises tells the other ranks why (their collectives fail naming the rank); ``run`` then
raises Ray's error. Blocking calls (``start``, ``run``, ``execute``) wait on ``ray.get``,
whose waits end when a worker fails or tfring's own timeouts fire (docs/configuration.md).
docs/engines.md maps each of Horovod's arguments.
"""

import dataclasses
import warnings

import ray

from tfring._engines.ray import job

_ELASTIC_FIX = ("tfring's RayExecutor runs a fixed-size job (it has no ElasticRayExecutor). For elastic training "
                "on Ray use tfring.ray.TfringTrainer with ray.train.FailureConfig(max_failures=N) (Ray restarts "
                "the worker group), or tfringrun --min-np/--max-np off Ray (docs/engines.md, docs/elastic.md); "
                "for a fixed-size job pass num_workers=N instead")


@dataclasses.dataclass
class RaySettings:
    """What ``RayExecutor.create_settings`` returns: Horovod's ``MiniSettings`` fields.

    ``timeout_s`` becomes tfring's ``start_timeout_s`` (how long ``init()`` waits for every
    rank to reach the rendezvous: Horovod's Gloo rendezvous timeout);
    ``placement_group_timeout_s`` bounds the wait for Ray to place the workers; ``nics``
    picks the address each rank binds (``TFRING_BIND_ADDR``: the IPv4 address of the first,
    by name, of these interfaces its host has). ``ssh_identity_file`` is kept but unused:
    Ray starts the workers, tfring needs no ssh.
    """

    timeout_s: float = 30
    placement_group_timeout_s: float = 100
    nics: set = None
    ssh_identity_file: str = None
    verbose: int = 1


@ray.remote
class _Worker:
    """One rank. Holds the optional user object ``execute`` works on."""

    def __init__(self):
        self.executable = None

    def node_facts(self, nics):
        return job.node_facts(nics)

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
    """N Ray actors forming one tfring job; Horovod 0.28's ``horovod.ray.RayExecutor`` API.

    Args:
      settings: ``RayExecutor.create_settings(...)`` (Horovod's), or a dict of tfring
        settings for every worker (as ``TfringConfig.settings``), or None.
      num_workers: ranks (actors), placed by a Ray placement group with the PACK strategy
        (as Horovod does). Default 1 when ``num_hosts`` is not given.
      num_hosts, num_workers_per_host: instead of ``num_workers``: ``num_hosts *
        num_workers_per_host`` ranks, ``num_workers_per_host`` on each of ``num_hosts``
        different Ray nodes (a STRICT_SPREAD placement group, one bundle per node, as Horovod
        does); the ranks of a node are consecutive.
      cpus_per_worker, use_gpu, gpus_per_worker: each actor's Ray resources
        (``gpus_per_worker`` defaults to 1 with ``use_gpu``). With ``use_gpu`` the ranks of a
        node all see the node's GPUs Ray gave them, in rank order (Horovod's
        ``CUDA_VISIBLE_DEVICES``), so ``gpus[hvd.local_rank()]`` is a rank's own GPU.
      use_current_placement_group: inside a placement group (a Ray Tune trial), place the
        workers in it instead of creating one (Horovod's default).
      min_workers, max_workers, reset_limit, cooldown_range: Horovod's elastic mode;
        refused with a ValueError that names tfring's elastic paths.
      elastic_timeout, override_discovery: used by Horovod only with ``min_workers``;
        accepted and unused.
    """

    @classmethod
    def create_settings(cls, timeout_s=30, ssh_identity_file=None, ssh_str=None, placement_group_timeout_s=100,
                        nics=None):
        """Horovod's ``RayExecutor.create_settings``: a ``RaySettings`` for the constructor.

        Args:
          timeout_s: the rendezvous timeout (tfring's ``start_timeout_s``).
          ssh_identity_file, ssh_str: unused (tfring on Ray needs no ssh; unlike Horovod,
            no key file is written); a warning says so when given.
          placement_group_timeout_s: how long ``start()`` waits for Ray to place the workers.
          nics: interface names; each rank binds the address of one its host has.
        """
        if ssh_identity_file is not None or ssh_str is not None:
            warnings.warn("RayExecutor.create_settings: ssh_identity_file and ssh_str are ignored (no key file is "
                          "written): Ray starts tfring's workers and tfring uses no ssh. Drop them.",
                          UserWarning, stacklevel=2)
        if isinstance(nics, str):
            raise TypeError(f"RayExecutor.create_settings(nics={nics!r}): pass a set of interface names, "
                            f"nics={{{nics!r}}}")
        return RaySettings(timeout_s=timeout_s, placement_group_timeout_s=placement_group_timeout_s,
                           nics=set(nics) if nics else None, ssh_identity_file=ssh_identity_file)

    def __init__(self, settings=None, num_workers=None, num_hosts=None, num_workers_per_host=1, cpus_per_worker=1,
                 use_gpu=False, gpus_per_worker=None, use_current_placement_group=True, min_workers=None,
                 max_workers=None, reset_limit=None, cooldown_range=None, elastic_timeout=600,
                 override_discovery=True):
        for name, value in (("min_workers", min_workers), ("max_workers", max_workers),
                            ("reset_limit", reset_limit), ("cooldown_range", cooldown_range)):
            if value is not None:
                raise ValueError(f"RayExecutor({name}={value!r}) asks for Horovod's elastic mode: {_ELASTIC_FIX}")
        if gpus_per_worker and not use_gpu:
            raise ValueError(f"RayExecutor(gpus_per_worker={gpus_per_worker}) needs use_gpu=True")
        if num_hosts is not None:
            if num_workers is not None:
                raise ValueError(f"RayExecutor(num_workers={num_workers}, num_hosts={num_hosts}): pass one of them: "
                                 "num_workers=N (N ranks anywhere), or num_hosts=H with num_workers_per_host=K "
                                 "(K ranks on each of H nodes)")
            if num_hosts < 1 or num_workers_per_host < 1:
                raise ValueError(f"RayExecutor needs num_hosts >= 1 and num_workers_per_host >= 1. Received: "
                                 f"num_hosts={num_hosts}, num_workers_per_host={num_workers_per_host}")
            num_workers = num_hosts * num_workers_per_host
        elif num_workers_per_host != 1:
            raise ValueError(f"RayExecutor(num_workers_per_host={num_workers_per_host}) is used only with num_hosts: "
                             f"pass num_hosts=H too (H * {num_workers_per_host} ranks), or num_workers=N alone")
        elif num_workers is None:
            num_workers = 1
        if num_workers < 1:
            raise ValueError(f"RayExecutor needs num_workers >= 1. Received: {num_workers}")
        self.settings, self.placement_group_timeout_s, self.nics = _tfring_settings(settings)
        self.num_workers = num_workers
        self.num_hosts = num_hosts
        self.num_workers_per_host = num_workers_per_host
        self.cpus_per_worker = cpus_per_worker
        self.use_gpu = use_gpu
        self.gpus_per_worker = (gpus_per_worker or 1) if use_gpu else 0
        self.use_current_placement_group = use_current_placement_group
        self.workers = []
        self._store = None
        self._placement_group = None

    def start(self, executable_cls=None, executable_args=None, executable_kwargs=None, extra_env_vars=None):
        """Places and starts the actors and gives each its environment (plus
        ``extra_env_vars``); with ``executable_cls``, each builds
        ``executable_cls(*args, **kwargs)`` for ``execute``. Blocking.

        Raises:
          TimeoutError: Ray could not place the workers within ``placement_group_timeout_s``.
        """
        if self.workers:
            raise RuntimeError("RayExecutor.start() was already called; call shutdown() first")
        job.check_ray_version()
        try:
            self.workers = [_Worker.options(**options).remote() for options in self._placement()]
            facts = ray.get([w.node_facts.remote(self.nics) for w in self.workers])
            hosts = [f["ip"] for f in facts]
            self._store = job.start_store()
            envs = job.worker_envs(hosts, self._store, self.settings)
            if self.nics:
                for env, f in zip(envs, facts):
                    env["TFRING_BIND_ADDR"] = f["bind_addr"]
            if self.use_gpu:
                for env, devices in zip(envs, job.shared_cuda_devices(hosts, [f["gpu_ids"] for f in facts])):
                    env["CUDA_VISIBLE_DEVICES"] = devices
            ray.get([w.set_env.remote({**env, **(extra_env_vars or {})}) for w, env in zip(self.workers, envs)])
            ray.get([w.start_executable.remote(executable_cls, list(executable_args or []),
                                               dict(executable_kwargs or {})) for w in self.workers])
        except BaseException:
            self.shutdown()
            raise

    def run_remote(self, fn, args=None, kwargs=None):
        """``fn(*args, **kwargs)`` on every rank; a list of ``ObjectRef``, by rank."""
        self._check_started()
        return [w.run.remote(fn, list(args or []), dict(kwargs or {})) for w in self.workers]

    def run(self, fn, args=None, kwargs=None, callbacks=None):
        """``fn(*args, **kwargs)`` on every rank; its results, by rank. Blocking.
        ``callbacks`` are not called (nor by Horovod's non-elastic RayExecutor)."""
        _warn_callbacks(callbacks)
        return ray.get(self.run_remote(fn, args, kwargs))

    def execute(self, fn, callbacks=None):
        """``fn(executable)`` on every rank (the object ``start`` built, or None); results
        by rank. Blocking. ``callbacks`` as in ``run``."""
        _warn_callbacks(callbacks)
        self._check_started()
        return ray.get([w.execute.remote(fn) for w in self.workers])

    def execute_single(self, fn):
        """``fn(executable)`` on rank 0 only. Blocking."""
        self._check_started()
        return ray.get(self.workers[0].execute.remote(fn))

    def shutdown(self):
        """Kills the actors, removes the placement group it made, stops the store. Idempotent."""
        for w in self.workers:
            ray.kill(w)
        self.workers = []
        if self._placement_group is not None:
            ray.util.remove_placement_group(self._placement_group)
            self._placement_group = None
        if self._store is not None:
            self._store.stop()
            self._store = None

    def _check_started(self):
        if not self.workers:
            raise RuntimeError("RayExecutor is not started: call start() first")

    def _placement(self):
        """Each rank's actor options, as Horovod places them: in the current placement
        group when there is one (and use_current_placement_group), else in a new one, PACK
        with one bundle per rank (num_workers) or STRICT_SPREAD with one bundle per node
        (num_hosts)."""
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        resources = {"num_cpus": self.cpus_per_worker, "num_gpus": self.gpus_per_worker}
        current = ray.util.get_current_placement_group() if self.use_current_placement_group else None
        if current is not None:
            strategy = PlacementGroupSchedulingStrategy(current, -1, placement_group_capture_child_tasks=False)
            return [{**resources, "scheduling_strategy": strategy}] * self.num_workers
        per_bundle = 1 if self.num_hosts is None else self.num_workers_per_host
        bundle = {k: v * per_bundle for k, v in (("CPU", self.cpus_per_worker), ("GPU", self.gpus_per_worker)) if v}
        if not bundle:  # no resources asked for: nothing to place
            return [resources] * self.num_workers
        count, kind = (self.num_workers, "PACK") if self.num_hosts is None else (self.num_hosts, "STRICT_SPREAD")
        self._placement_group = ray.util.placement_group([dict(bundle) for _ in range(count)], strategy=kind)
        ready, _ = ray.wait([self._placement_group.ready()], timeout=self.placement_group_timeout_s)
        if not ready:
            where = (f"{self.num_hosts} different Ray nodes with {bundle} free on each" if self.num_hosts is not None
                     else f"{count} x {bundle}")
            raise TimeoutError(
                f"RayExecutor.start(): Ray could not place the workers ({kind} placement group: {where}) within "
                f"placement_group_timeout_s={self.placement_group_timeout_s}. Ray has {ray.available_resources()} "
                "free. Ask for fewer workers or resources (num_hosts, num_workers_per_host, num_workers, "
                "cpus_per_worker, gpus_per_worker), add nodes, or wait longer "
                "(RayExecutor.create_settings(placement_group_timeout_s=...))")
        return [{**resources, "scheduling_strategy": PlacementGroupSchedulingStrategy(
            self._placement_group, rank // per_bundle, placement_group_capture_child_tasks=False)}
            for rank in range(self.num_workers)]


def _tfring_settings(settings):
    """(tfring settings dict, placement group timeout, nics) from the constructor's ``settings``."""
    if settings is None or isinstance(settings, dict):
        return dict(settings or {}), 100, None
    if hasattr(settings, "timeout_s"):  # RayExecutor.create_settings(...), or an object of its shape
        tfring_settings = {"start_timeout_s": settings.timeout_s}
        nics = getattr(settings, "nics", None)
        return tfring_settings, getattr(settings, "placement_group_timeout_s", 100), set(nics) if nics else None
    raise TypeError(f"RayExecutor(settings=...) takes RayExecutor.create_settings(timeout_s=...), a dict of tfring "
                    f"settings ({{'fusion_threshold': ...}}, docs/configuration.md), or None. Received: "
                    f"{type(settings).__name__}")


def _warn_callbacks(callbacks):
    if callbacks:
        warnings.warn("RayExecutor: callbacks are not called (Horovod's non-elastic RayExecutor does not call them "
                      "either); drop them, or log from rank 0 inside the function", UserWarning, stacklevel=3)
