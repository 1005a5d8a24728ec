"""The public rendezvous API, for whatever starts the processes of a job: ``tfringrun``,
a Ray Train backend, a Kubernetes operator's entry point, a test.

    from tfring.runner import Store, rank_identities

    with Store(host="0.0.0.0", advertise="10.0.0.5") as store:
        for rank, identity in enumerate(rank_identities(["node-a", "node-a", "node-b"])):
            start_worker(env={**identity, **store.env()})   # your way of starting processes
        ...

A worker needs only its identity (``TFRING_RANK`` ... ``TFRING_CROSS_SIZE``) and the
store's ``TFRING_STORE_ADDR`` / ``TFRING_SECRET``; ``tfring.init()`` does the rest. No Ray,
Kubernetes or MPI import here. (Without any process to serve the store, rank 0 can serve it
itself: ``TFRING_STORE_SERVE=1``, docs/launcher.md "Started by others".)
"""

import threading

from tfring import _core
from tfring.runner import jobenv


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
        self.secret = secret or jobenv.new_secret()
        self.host = host
        self._server = _core.StoreServer(host, port, self.secret)
        self.port = self._server.port
        self.address = jobenv.store_address(advertise or host, self.port)
        self._stopped = False

    def env(self):
        """``{"TFRING_STORE_ADDR": ..., "TFRING_SECRET": ...}`` for every worker. The secret
        belongs in the workers' environment only: never in a command line or a log."""
        return {"TFRING_STORE_ADDR": self.address, jobenv.SECRET: self.secret}

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


def rank_identities(hosts):
    """Every rank's identity variables from the host each rank runs on.

    Args:
      hosts: ``hosts[r]`` is the host (any hashable label: a name, a node IP) of rank r.

    Returns:
      A list, by rank, of dicts with ``TFRING_RANK``, ``TFRING_SIZE``, ``TFRING_LOCAL_RANK``,
      ``TFRING_LOCAL_SIZE``, ``TFRING_CROSS_RANK``, ``TFRING_CROSS_SIZE`` (strings). Local
      ranks count the ranks of one host in rank order; hosts are numbered (cross rank) in
      the order they first appear. Ranks of a host need not be consecutive (Ray orders
      workers its own way).

    Raises:
      ValueError: no hosts.
    """
    hosts = list(hosts)
    if not hosts:
        raise ValueError("rank_identities needs at least one rank's host. Received: []")
    order = list(dict.fromkeys(hosts))
    per_host = {h: [r for r, x in enumerate(hosts) if x == h] for h in order}
    out = []
    for r, h in enumerate(hosts):
        out.append({
            "TFRING_RANK": str(r),
            "TFRING_SIZE": str(len(hosts)),
            "TFRING_LOCAL_RANK": str(per_host[h].index(r)),
            "TFRING_LOCAL_SIZE": str(len(per_host[h])),
            "TFRING_CROSS_RANK": str(order.index(h)),
            "TFRING_CROSS_SIZE": str(len(order)),
        })
    return out
