"""The environment a launcher (tfringrun, its elastic driver, tfring.run, Spark, Ray, or
rank 0 under MPI) hands each worker, as the worker's lower layers read it.

Pure functions of strings and ``os.environ``; thread-safe. The secret travels only in
the workers' environment, never in argv. ``tfring._runner.jobenv`` and
``tfring._elastic.protocol`` re-export these names under their former paths.
"""

import os

SECRET = "TFRING_SECRET"
STORE_ADDR = "TFRING_STORE_ADDR"
ELASTIC_WORKER = "TFRING_ELASTIC_WORKER"  # the worker's id, set by the elastic driver; marks an elastic worker


def elastic_worker_id(environ=None):
    """This process's elastic worker id, or None when it is not an elastic worker."""
    return (os.environ if environ is None else environ).get(ELASTIC_WORKER) or None


def new_secret():
    """A fresh per-job secret: 32 random bytes, hex-encoded."""
    import secrets  # here: every rank imports this module, only launchers make secrets (hashlib, ~3 ms)

    return secrets.token_hex(32)


def store_address(bind_host, port):
    """The address workers on this machine use to reach a store bound to ``bind_host``."""
    host = bind_host
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host in ("::", "[::]"):
        host = "::1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{host}:{port}"


def split_store_address(address):
    """``(host, port)`` of a ``host:port`` store address (IPv6 brackets removed): the
    inverse of ``store_address``."""
    host, _, port = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)
