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

from tfring._bootstrap.store import Store  # noqa: F401 - public here (tfring.runner.Store)


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
