"""The job's authenticated key-value store served by this process (``Store``): the launcher's
rendezvous, and any process that serves a registry the same way (the tf.data compute job's
rank 0, the Spark driver of ``tfring._engines.spark.compute_worker``). Public as
``tfring.runner.Store`` (tfring/_runner/rendezvous.py); here, below the layers that serve
one, so that none of them imports the launcher upward.
"""

import threading

from tfring import _core
from tfring._bootstrap import launch_env


class Store:
    """The job's authenticated key-value store, served by this process on a background
    thread. A context manager: ``stop()`` on exit.

    Args:
      host: the address to listen on (``0.0.0.0`` / ``::``: every interface).
      port: 0 picks a free port.
      secret: the job secret; None generates a fresh one (``secrets.token_hex(32)``).
      advertise: the host workers use to reach the store (default ``host``; a wildcard
        ``host`` without ``advertise`` is reachable as the loopback address only).

    Attributes:
      host, port, secret: as served.
      address: ``host:port`` for ``TFRING_STORE_ADDR`` (IPv6 in brackets).

    Raises:
      tfring.errors.TfringError: the address cannot be bound (the message says why).
    """

    def __init__(self, host="127.0.0.1", port=0, secret=None, advertise=None):
        self.secret = secret or launch_env.new_secret()
        self.host = host
        self._server = _core.StoreServer(host, port, self.secret)
        self.port = self._server.port
        self.address = launch_env.store_address(advertise or host, self.port)
        self._stopped = False

    def env(self):
        """``{"TFRING_STORE_ADDR": ..., "TFRING_SECRET": ...}`` for every worker. The secret
        belongs in the workers' environment only: never in a command line or a log."""
        return {"TFRING_STORE_ADDR": self.address, launch_env.SECRET: self.secret}

    def stop(self, timeout=5.0):
        """Stops serving (closes every client). Never blocks more than ``timeout`` seconds;
        returns False if the server was still stopping then (it finishes in the background).
        Idempotent."""
        if self._stopped:
            return True
        self._stopped = True
        t = threading.Thread(target=self._server.stop, daemon=True, name="tfring-store-stop")
        t.start()
        t.join(timeout)
        return not t.is_alive()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def __repr__(self):
        return f"Store(address={self.address!r})"  # never the secret
