"""A connection of this process to the job's rendezvous store, for Python-side agreements
(which save a rank waits for, see ``coordination``).

The core's runtime holds its own store client but does not expose it; this module opens a
second one to the same store, found exactly as the core found it: ``TFRING_STORE_ADDR``
and ``TFRING_SECRET`` from the explicit ``tfring.init(...)`` arguments, else the settings
discovered under mpirun (where rank 0 serves the store in-process), else the environment
(tfringrun). Keys are prefixed with ``TFRING_JOB_ID``.

Thread-safety: one lock serializes every request of the shared client.
"""

import os
import threading

from tfring import _errors as errors
from tfring._bootstrap import launch_env

_lock = threading.Lock()
_client = None
_client_identity = None


def _setting(name):
    """The effective value of a store setting (explicit > discovered > environment)."""
    from tfring._basics import basics, environment_discovery

    for source in (getattr(basics, "_explicit_overrides", None) or {},
                   getattr(environment_discovery, "_cached", None) or {},
                   os.environ):
        value = source.get(name)
        if value:
            return value
    return ""


class JobStore:
    """``set`` / ``try_get`` on the job's store under ``<job id>/<prefix>``."""

    def __init__(self, client, prefix):
        self._client = client
        self._prefix = prefix

    def set(self, key, value):
        with _lock:
            self._client.set(self._prefix + key, value)

    def try_get(self, key, wait_s):
        """The value of ``key``, waiting at most ``wait_s`` seconds; None if absent by then."""
        with _lock:
            try:
                return self._client.get(self._prefix + key, wait_s)
            except errors.TimeoutError:
                return None


def job_store(prefix):
    """The shared ``JobStore`` for keys under ``prefix`` (connects on first use).

    Raises:
      tfring.errors.PreconditionError: tfring is not initialized, or no store address or
        secret can be found (a job of one process has no store).
    """
    global _client, _client_identity
    from tfring import _core

    if not _core.is_initialized():
        raise errors.PreconditionError("tfring is not initialized: call tfring.init() first")
    config = _core.config()
    address = config.get("TFRING_STORE_ADDR", ("",))[0]
    job_id = config.get("TFRING_JOB_ID", ("default",))[0]
    secret = _setting("TFRING_SECRET")
    if not address or not secret:
        raise errors.PreconditionError(
            "tfring cannot reach the job's store from Python (TFRING_STORE_ADDR or TFRING_SECRET unknown)")
    identity = (address, secret)
    with _lock:
        if _client is None or _client_identity != identity:
            host, port = launch_env.split_store_address(address)
            timeout = float(config.get("TFRING_TIMEOUT_S", ("30",))[0])
            _client = _core.StoreClient(host, port, secret, timeout)
            _client_identity = identity
        client = _client
    return JobStore(client, f"{job_id}/{prefix}")
