"""Who this process is in a job that tfringrun did not start: ``mpirun`` (Open MPI, MPICH /
Hydra), Slurm's ``srun``, or a scheduler that sets ``TFRING_*`` variables itself.

``tfring.init()`` calls ``discover()`` when ``TFRING_RANK`` is neither in the environment
nor an argument. The result is a dict of ``TFRING_*`` settings that ``init`` passes to the
core as arguments (so ``tfring.config()`` shows them with source ``argument``); explicit
``init(...)`` arguments still win.

Identity (``from_environment``, pure, no I/O), first match:

| Launcher | rank, size | local rank, size | cross rank, size |
|---|---|---|---|
| Open MPI | ``OMPI_COMM_WORLD_RANK/SIZE`` | ``OMPI_COMM_WORLD_LOCAL_RANK/SIZE`` | by host name through MPI, else ``rank // local_size`` |
| MPICH / Hydra | ``PMI_RANK/SIZE`` | ``MPI_LOCALRANKID``, ``MPI_LOCALNRANKS`` | same |
| Slurm ``srun`` | ``SLURM_PROCID``, ``SLURM_NTASKS`` | ``SLURM_LOCALID``; tasks per node from ``SLURM_STEP_TASKS_PER_NODE`` / ``SLURM_TASKS_PER_NODE`` (``2(x3),1``) or ``SLURM_NTASKS_PER_NODE`` | ``SLURM_NODEID``, ``SLURM_STEP_NUM_NODES`` / ``SLURM_NNODES`` |

Slurm counts only inside an ``srun`` step (``SLURM_STEP_ID`` set): a batch script itself
also has ``SLURM_PROCID=0``, and must not wait for ranks that will never come.
Without a host-based cross rank, ``rank // local_size`` assumes ranks are placed host by
host (the default of mpirun and srun); a wrong guess only costs shared memory (the core
never shares memory across host names).

The store (``discover``), first match:

1. ``TFRING_STORE_ADDR`` and ``TFRING_SECRET`` are set (by you or a scheduler): used.
2. mpi4py can be imported (under mpirun; under srun only with an MPI built for Slurm):
   rank 0 serves a store in this process (``_core.StoreServer``) on ``TFRING_BIND_ADDR``,
   else ``127.0.0.1`` when every rank is on its host, else the address it uses to reach
   another rank's host; it sends the address and a fresh secret to every rank with
   ``MPI_Bcast`` (MPI's own channel: never a command line or a file). The store lives until
   the process exits. So ``mpirun -np 4 python train.py`` needs nothing else.
3. Otherwise ``discover`` raises ``PreconditionError`` saying what to set.

The result is computed once per process and reused by later ``init()`` calls (after
``shutdown()``), which therefore need no MPI collective.
"""

import dataclasses
import os
import re

from tfring import _errors as errors

_cached = None
_store_server = None  # rank 0's in-process store (kept alive until exit)


@dataclasses.dataclass(frozen=True)
class Identity:
    """This process's place in the job, as a launcher described it."""

    source: str  # "Open MPI", "MPICH", "Slurm"
    rank: int
    size: int
    local_rank: int
    local_size: int
    cross_rank: int = None  # None: not given by the launcher
    cross_size: int = None

    def env(self):
        """The TFRING_* identity settings; cross rank/size guessed host by host when unknown."""
        cross_rank, cross_size = self.cross_rank, self.cross_size
        if cross_rank is None:
            if self.size % self.local_size == 0:
                cross_rank, cross_size = self.rank // self.local_size, self.size // self.local_size
            else:
                cross_rank, cross_size = 0, 1
        return {"TFRING_RANK": str(self.rank), "TFRING_SIZE": str(self.size),
                "TFRING_LOCAL_RANK": str(self.local_rank), "TFRING_LOCAL_SIZE": str(self.local_size),
                "TFRING_CROSS_RANK": str(cross_rank), "TFRING_CROSS_SIZE": str(cross_size)}


def _int(environ, name, source):
    text = environ.get(name, "")
    try:
        return int(text)
    except ValueError:
        raise errors.InvalidArgumentError(
            f"running under {source}, but {name} is not an integer. Received: {text!r}") from None


def tasks_per_node(text):
    """Slurm's compressed task counts: ``"2(x3),1"`` -> ``[2, 2, 2, 1]``.

    Raises:
      ValueError: malformed text.
    """
    counts = []
    for item in text.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", item)
        if not m:
            raise ValueError(f"cannot read Slurm task counts {text!r}")
        counts += [int(m.group(1))] * int(m.group(2) or 1)
    return counts


def _slurm(environ):
    source = "Slurm"
    rank = _int(environ, "SLURM_PROCID", source)
    size = _int(environ, "SLURM_NTASKS" if "SLURM_NTASKS" in environ else "SLURM_NPROCS", source)
    local_rank = _int(environ, "SLURM_LOCALID", source)
    node = _int(environ, "SLURM_NODEID", source) if "SLURM_NODEID" in environ else None
    nodes_var = next((v for v in ("SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES")
                      if v in environ), None)
    nodes = _int(environ, nodes_var, source) if nodes_var else None
    local_size = None
    counts_var = next((v for v in ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE") if v in environ), None)
    if counts_var and node is not None:
        try:
            counts = tasks_per_node(environ[counts_var])
        except ValueError as e:
            raise errors.InvalidArgumentError(f"running under Slurm: {counts_var}: {e}") from None
        if node < len(counts):
            local_size = counts[node]
    if local_size is None and "SLURM_NTASKS_PER_NODE" in environ:
        local_size = _int(environ, "SLURM_NTASKS_PER_NODE", source)
    if local_size is None:
        raise errors.InvalidArgumentError(
            "running under Slurm (SLURM_PROCID is set) but neither SLURM_TASKS_PER_NODE with "
            "SLURM_NODEID nor SLURM_NTASKS_PER_NODE says how many tasks share this node")
    if node is None or nodes is None:
        node = nodes = None
    return Identity(source, rank, size, local_rank, local_size, node, nodes)


def from_environment(environ=None):
    """This process's ``Identity`` from a launcher's variables, or None when none is found.

    Raises:
      tfring.errors.InvalidArgumentError: a launcher's variable is present but unreadable.
    """
    environ = os.environ if environ is None else environ
    if "OMPI_COMM_WORLD_RANK" in environ:
        s = "Open MPI"
        return Identity(s, _int(environ, "OMPI_COMM_WORLD_RANK", s), _int(environ, "OMPI_COMM_WORLD_SIZE", s),
                        _int(environ, "OMPI_COMM_WORLD_LOCAL_RANK", s),
                        _int(environ, "OMPI_COMM_WORLD_LOCAL_SIZE", s))
    if "PMI_RANK" in environ:
        s = "MPICH"
        has_local = "MPI_LOCALRANKID" in environ and "MPI_LOCALNRANKS" in environ
        rank = _int(environ, "PMI_RANK", s)
        return Identity(s, rank, _int(environ, "PMI_SIZE", s),
                        _int(environ, "MPI_LOCALRANKID", s) if has_local else 0,
                        _int(environ, "MPI_LOCALNRANKS", s) if has_local else 1,
                        None if has_local else rank, None if has_local else _int(environ, "PMI_SIZE", s))
    if "SLURM_PROCID" in environ and ("SLURM_STEP_ID" in environ or "SLURM_STEPID" in environ):
        return _slurm(environ)
    return None


def _mpi_store(identity, environ):
    """Identity settings with cross ranks by host name, plus the store that rank 0 serves and
    announces through MPI_Bcast."""
    import socket  # here, not at the top: init() under tfringrun never needs it

    from mpi4py import MPI  # initializes MPI if the program has not

    from tfring import _core
    from tfring._bootstrap import launch_env, network

    comm = MPI.COMM_WORLD
    if (comm.Get_rank(), comm.Get_size()) != (identity.rank, identity.size):
        raise errors.PreconditionError(
            f"{identity.source} says rank {identity.rank} of {identity.size} but MPI (mpi4py) says rank "
            f"{comm.Get_rank()} of {comm.Get_size()}: mpi4py is built for another MPI than the launcher's")
    hostnames = comm.allgather(socket.gethostname())
    unique = list(dict.fromkeys(hostnames))
    here = hostnames[identity.rank]
    settings = dataclasses.replace(identity, cross_rank=unique.index(here), cross_size=len(unique)).env()
    message = None
    if identity.rank == 0:
        global _store_server
        try:
            host = environ.get("TFRING_BIND_ADDR") or (
                "127.0.0.1" if len(unique) == 1 else network.reachable_address(unique[1:]))
            secret = launch_env.new_secret()
            _store_server = _core.StoreServer(host, 0, secret)
            message = (launch_env.store_address(host, _store_server.port), secret, None)
        except (ValueError, errors.TfringError) as e:
            message = (None, None, f"rank 0 cannot serve the job's store: {e}")
    address, secret, failure = comm.bcast(message, root=0)
    if failure:
        raise errors.PreconditionError(failure + " (set TFRING_BIND_ADDR to an address of rank 0's host)")
    settings["TFRING_STORE_ADDR"] = address
    settings["TFRING_SECRET"] = secret
    return settings


def _mpi4py_available():
    try:
        import mpi4py  # noqa: F401 - only whether it is there; MPI starts in _mpi_store
    except ImportError:
        return False
    return True


def discover(environ=None):
    """The TFRING_* settings for a process started by mpirun / srun (see the module
    docstring), or None when tfringrun or the user set TFRING_RANK, or no launcher is found.
    Computed once per process.

    Raises:
      tfring.errors.PreconditionError: more than one rank, no TFRING_STORE_ADDR and
        TFRING_SECRET, and no mpi4py to share a store; or rank 0 cannot serve one.
      tfring.errors.InvalidArgumentError: a launcher's variable is unreadable.
    """
    global _cached
    environ = os.environ if environ is None else environ
    if _cached is not None:
        return dict(_cached)
    if environ.get("TFRING_RANK"):
        return None
    identity = from_environment(environ)
    if identity is None:
        return None
    if identity.size == 1 or (environ.get("TFRING_STORE_ADDR") and environ.get("TFRING_SECRET")):
        settings = identity.env()
    elif _mpi4py_available():
        settings = _mpi_store(identity, environ)
    else:
        raise errors.PreconditionError(
            f"tfring found rank {identity.rank} of {identity.size} from {identity.source}, but no store to "
            "meet the other ranks: set TFRING_STORE_ADDR (host:port of a store, e.g. "
            "tfring._core.StoreServer(host, port, secret) served by your job script) and TFRING_SECRET on "
            "every rank, install mpi4py (then rank 0 serves the store and shares it through MPI), or start "
            "the job with tfringrun")
    _cached = settings
    return dict(settings)
