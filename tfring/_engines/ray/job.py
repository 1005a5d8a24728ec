"""What the Ray trainer and executor share: a store served by the process that owns the
job (Ray Train's controller, or the executor's driver) and the environment of each worker.

Ranks follow the order Ray gives the workers (Ray Train's world ranks); local ranks group
the workers by node IP in rank order, as Ray does for its own local ranks.
"""

import contextlib
import os
import warnings

from tfring._runner import rendezvous


def check_ray_version():
    """Warns once per process when Ray is not a tested release series."""
    import ray

    from tfring._engines.ray import SUPPORTED_RAY

    if not any(ray.__version__ == s or ray.__version__.startswith(s + ".") for s in SUPPORTED_RAY):
        warnings.warn(f"tfring.ray is tested with Ray {', '.join(SUPPORTED_RAY)}.x; this is Ray {ray.__version__}. "
                      "It builds on Ray Train's DeveloperAPI backend hooks, which may change between releases.",
                      RuntimeWarning, stacklevel=3)


def node_ip():
    """This process's node IP as Ray sees it (runs on a worker)."""
    import ray

    return ray.util.get_node_ip_address()


def node_facts(nics=None):
    """This worker's node IP, Ray node ID, Ray GPU IDs, and (with ``nics``) the address
    tfring binds (runs on a worker)."""
    import ray

    context = ray.get_runtime_context()
    return {"ip": node_ip(), "node_id": context.get_node_id(), "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
            "bind_addr": nic_address(nics) if nics else None}


def nic_address(nics):
    """The IPv4 address of the first (by name) of the interfaces ``nics`` that this host has:
    Horovod's ``nics`` setting as tfring's ``TFRING_BIND_ADDR``. Linux only."""
    import fcntl
    import socket
    import struct

    present = {name for _, name in socket.if_nameindex()}
    for nic in sorted(nics):
        if nic not in present:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:  # SIOCGIFADDR: the interface's IPv4 address
                packed = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", nic.encode()[:15]))
            except OSError:
                continue  # up without an IPv4 address
        return socket.inet_ntoa(packed[20:24])
    raise ValueError(f"nics={sorted(nics)}: none of these interfaces has an IPv4 address on host "
                     f"{socket.gethostname()} (its interfaces: {sorted(present)}). Pass interface names "
                     "every worker's host has to RayExecutor.create_settings(nics=...), or nics=None to let "
                     "tfring choose (the address that reaches the store)")


def shared_cuda_devices(hosts, gpu_ids):
    """``CUDA_VISIBLE_DEVICES`` by rank when ranks share their host's GPUs, as Horovod's
    RayExecutor sets it: every rank of a host sees the GPUs Ray gave all of them, in rank
    order, so a rank's own GPU is at its local rank (``gpus[hvd.local_rank()]``).

    Args:
      hosts: ``hosts[r]`` is rank r's host (the label ``rank_identities`` groups by).
      gpu_ids: ``gpu_ids[r]`` is the list of GPU IDs Ray gave rank r. An ID given to several
        ranks (fractional ``gpus_per_worker``) is listed once.
    """
    per_host = {}
    for host, ids in zip(hosts, gpu_ids):
        per_host.setdefault(host, {}).update(dict.fromkeys(str(i) for i in ids))
    return [",".join(per_host[host]) for host in hosts]


def start_store():
    """A store on every interface of this process's node, advertised at its Ray node IP.
    The caller stops it."""
    return rendezvous.Store(host="0.0.0.0", advertise=node_ip())


def worker_envs(node_ips, store, settings=None):
    """The environment of each worker, by rank: identity, store, and ``settings``
    (``{"fusion_threshold": ...}`` or ``{"TFRING_FUSION_THRESHOLD": ...}``)."""
    extra = {}
    for key, value in (settings or {}).items():
        name = key.upper() if key.upper().startswith("TFRING_") else "TFRING_" + key.upper()
        extra[name] = str(int(value) if isinstance(value, bool) else value)
    return [{**identity, **store.env(), **extra} for identity in rendezvous.rank_identities(node_ips)]


def set_env(env):
    """Runs on a worker: its tfring environment, replacing an earlier job's."""
    for name in [n for n in os.environ if n.startswith("TFRING_")]:
        del os.environ[name]
    os.environ.update(env)


def call_as_rank(fn, *args, **kwargs):
    """Runs ``fn`` on a worker whose environment is set. When ``fn`` raises, the other
    ranks learn why (``tfring.shutdown(reason)``): their collectives fail naming this rank
    instead of waiting for a timeout. Ray runs training functions in a thread, where
    tfring's excepthook never fires."""
    from tfring._basics import basics

    try:
        return fn(*args, **kwargs)
    except BaseException as e:
        if basics.is_initialized():
            with contextlib.suppress(Exception):  # already failing: report the user's error
                basics.shutdown(reason=f"{type(e).__name__}: {e}"[:2000])
        raise
