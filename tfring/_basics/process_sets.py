"""Process sets (Horovod's ``hvd.ProcessSet``): collectives on a subset of the ranks.

A process set is a sorted list of global ranks with an integer id; id 0 is the global set
(every rank), ``global_process_set``. Collectives take ``process_set=`` and run on the
set's members only; every member calls them, no other rank does. The core keeps the table
(cc/core/control/process_sets.h); this module makes registration collective and keeps the Python
objects.

Rules (docs/tensorflow.md, "Process sets"):

* ``init(process_sets=[...])``, ``add_process_set()`` and ``remove_process_set()`` are
  collective over the global set: every rank calls them with the same sets, in the same
  order. Each one exchanges the requested ranks (a ``ValueError`` on every rank names the
  ranks that asked for something else), registers the set in the core under the next id
  and ends with a global barrier, so no rank submits into a set rank 0 does not know yet.
  Blocking, bounded by ``TFRING_TIMEOUT_S``.
* Ids are assigned in order (the ``init`` sets get 1..k, then each add the next) and never
  reused within one ``init``: a removed set's stale object cannot reach a newer set.
* As in Horovod, a set whose ranks equal a registered set's (the global set included) is a
  duplicate: ``add_process_set`` and ``init(process_sets=...)`` raise ``ValueError``.
  ``remove_process_set`` returns False, without communicating, for ``global_process_set`` and
  for a set that is not registered (never added, already removed), and True once it removed one.
* An unknown or removed id is a ``ValueError`` at the call; calling a collective on a set
  this rank is not in is ``InvalidArgumentError`` (from the core, naming the set and rank).
* ``global_process_set.ranks`` is every rank (``list(range(size()))``) while tfring is
  initialized, ``[]`` before ``init()`` and after ``shutdown()``.
* ``shutdown()`` forgets every set and resets the ids of the objects.

Thread-safety: registration functions are meant for the main thread (they are collective);
``resolve`` is thread-safe (it reads a dict).
"""

import threading

import numpy as np

from tfring import _core
from tfring._basics import auto_names


class ProcessSet:
    """A set of ranks that run collectives together.

    Args:
      ranks: the global ranks of the set (any order; stored sorted).

    Attributes:
      ranks: the sorted global ranks.
      process_set_id: the id once registered (``init(process_sets=...)`` or
        ``add_process_set``), else None.
    """

    def __init__(self, ranks):
        if isinstance(ranks, (str, bytes)) or not hasattr(ranks, "__iter__"):
            raise ValueError("ProcessSet takes a list of ranks (an MPI communicator is not supported by "
                             f"tfring). Received: {ranks!r}")
        ranks = list(ranks)
        if any(isinstance(r, bool) or not isinstance(r, (int, np.integer)) for r in ranks):
            raise ValueError(f"ProcessSet ranks must be integers. Received: {ranks!r}")
        ranks = sorted(int(r) for r in ranks)
        if len(set(ranks)) != len(ranks):
            raise ValueError(f"ProcessSet ranks must be distinct. Received: {ranks!r}")
        self.ranks = ranks
        self.process_set_id = None

    def _registered_ranks(self):
        if self.process_set_id == 0:
            return list(range(_core.size()))
        if self.process_set_id is None or resolve(self) is None:
            return None
        return self.ranks

    def size(self):
        """Number of ranks in the set; None while it is not registered."""
        ranks = self._registered_ranks()
        return None if ranks is None else len(ranks)

    def rank(self):
        """This process's index within the set (0..size()-1); -1 when it is not a member,
        None while the set is not registered."""
        ranks = self._registered_ranks()
        if ranks is None:
            return None
        me = _core.rank()
        return ranks.index(me) if me in ranks else -1

    def included(self):
        """Whether this process is a member (None while the set is not registered)."""
        ranks = self._registered_ranks()
        return None if ranks is None else _core.rank() in ranks

    def __eq__(self, other):
        return isinstance(other, ProcessSet) and self.ranks == other.ranks and \
            self.process_set_id == other.process_set_id

    def __hash__(self):
        # The ranks only: the id changes when the set is added or removed, and an object kept
        # in a dict or set must stay findable (equal objects still hash equal).
        return hash(tuple(self.ranks or ()))

    def __repr__(self):
        return f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks})"

    def __str__(self):
        # Horovod's str() (its tests and users' logs compare it); tfring never takes an MPI communicator.
        return f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks}, mpi_comm=None)"


class _GlobalProcessSet(ProcessSet):
    """The set of every rank (id 0). Its ``ranks`` follow the running job (an elastic job's
    size changes between generations), hence a property instead of a stored list."""

    def __init__(self):  # no ranks to store: see `ranks`
        self.process_set_id = 0

    @property
    def ranks(self):
        return list(range(_core.size())) if _core.is_initialized() else []

    def __hash__(self):
        return hash("tfring.global_process_set")  # stable while the job's size changes

    def __eq__(self, other):
        return isinstance(other, _GlobalProcessSet)


global_process_set = _GlobalProcessSet()

_lock = threading.Lock()
_by_id = {}     # id -> ProcessSet, ids other than 0
_next_id = [1]  # the id the next registration gets


def resolve(process_set):
    """The core id of ``process_set`` (None or ``global_process_set``: 0).

    Raises:
      TypeError: not a ProcessSet.
      ValueError: never registered, or removed (the message names the id).
    """
    if process_set is None:
        return 0
    if not isinstance(process_set, ProcessSet):
        raise TypeError(f"process_set must be a tfring ProcessSet (or None for the global set). "
                         f"Received: {process_set!r}")
    pid = process_set.process_set_id
    if pid == 0:
        return 0
    if pid is None:
        raise ValueError(f"{process_set!r} is not registered: pass it to init(process_sets=[...]) or "
                         "add_process_set() on every rank first")
    with _lock:
        known = _by_id.get(pid)
    if known is None or known.ranks != process_set.ranks:
        raise ValueError(f"process set id {pid} is not registered (removed, or never added): "
                         f"{process_set!r}. Registered ids: {sorted(_by_id) or 'none'} and 0 (global)")
    return pid


def process_set_by_id(process_set_id):
    """The registered ProcessSet with this id (0: ``global_process_set``)."""
    if process_set_id == 0:
        return global_process_set
    with _lock:
        ps = _by_id.get(process_set_id)
    if ps is None:
        raise ValueError(f"no process set with id {process_set_id} is registered")
    return ps


def process_sets():
    """Every registered set, the global one first, by id."""
    with _lock:
        return [global_process_set] + [_by_id[i] for i in sorted(_by_id)]


def _exchange(kind, values):
    """Allgathers this rank's int64 ``values`` (any length) over the global set and returns
    every rank's list, by rank. Collective, blocking (bounded by TFRING_TIMEOUT_S)."""
    mine = np.asarray([len(values), *values], dtype=np.int64)
    flat = _core.allgather_async(mine, auto_names.next_name(f"process_sets.{kind}")).wait().tolist()
    out, i = [], 0
    while i < len(flat):
        n = int(flat[i])
        out.append([int(v) for v in flat[i + 1:i + 1 + n]])
        i += 1 + n
    return out


def _barrier(kind):
    _core.barrier_async(auto_names.next_name(f"process_sets.{kind}.barrier")).wait()


def _check_same(kind, what, by_rank):
    differing = [r for r, v in enumerate(by_rank) if v != by_rank[0]]
    if differing:
        detail = "; ".join(f"rank {r}: {by_rank[r]}" for r in [0, *differing])
        raise ValueError(f"{kind} is collective: every rank must pass the same {what}, in the same order, "
                         f"but rank(s) {differing} differ from rank 0 ({detail})")


def add_process_set(process_set):
    """Registers a set on every rank and returns it with its ``process_set_id``. Collective:
    every rank calls it with the same ranks, in the same order (blocking).

    Args:
      process_set: a ProcessSet or a list of global ranks.

    Raises:
      ValueError: ranks out of range; a duplicate: the ranks of a registered set (the
        global one, every rank, included; so also a ProcessSet object already registered),
        as Horovod; or ranks that differ between ranks (the message names them).
    """
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    size = _core.size()
    problem = None
    # A registered object is found by its ranks below; an object whose id is stale (removed,
    # from before shutdown(), or a copy) is added anew under a new id, as in Horovod.
    if not process_set.ranks or any(r < 0 or r >= size for r in process_set.ranks):
        problem = f"a process set needs ranks in 0..{size - 1}. Received: {process_set.ranks}"
    else:
        same = _registered_with_ranks(process_set.ranks)
        if same is not None:
            problem = (f"Attempted to add a duplicate process set: ranks {process_set.ranks} are already "
                       f"process set id {same.process_set_id}"
                       + (" (global_process_set, every rank)" if same.process_set_id == 0 else "")
                       + "; use that set, or remove it first")
    # Even a bad request takes part in the exchange (as [-1]): the other ranks then fail at
    # once naming this one, instead of waiting for it until TFRING_TIMEOUT_S.
    by_rank = _exchange("add", [-1] if problem else process_set.ranks)
    if problem:
        raise ValueError(problem)
    _check_same("add_process_set()", "ranks", by_rank)
    with _lock:
        pid = _next_id[0]
        _next_id[0] += 1
    _core.add_process_set(pid, process_set.ranks)
    with _lock:
        _by_id[pid] = process_set
    process_set.process_set_id = pid
    _barrier("add")  # rank 0 knows the set before any member submits into it
    return process_set


def remove_process_set(process_set):
    """Unregisters a set on every rank (collective, like ``add_process_set``) and resets the
    object's id. Collectives still in flight on the set are the caller's error.

    Returns:
      True when the set was removed. False, at once and without communicating, as in
      Horovod: for ``global_process_set`` (never removed) and for a set that is not
      registered (never added, already removed, or left from before ``shutdown()``).

    Raises:
      TypeError: not a ProcessSet.
      ValueError: ranks that passed different sets (the message names them).
    """
    if not isinstance(process_set, ProcessSet):
        raise TypeError(f"remove_process_set takes a tfring ProcessSet. Received: {process_set!r}")
    pid = process_set.process_set_id
    if pid is None or pid == 0:
        return False
    with _lock:
        known = _by_id.get(pid)
    if known is None or known.ranks != process_set.ranks:
        return False  # a stale object: the same answer on every rank (every rank has the same table)
    _check_same("remove_process_set()", "process set", _exchange("remove", [pid]))
    _core.remove_process_set(pid)
    with _lock:
        removed = _by_id.pop(pid, None)
    if removed is not None:
        removed.process_set_id = None
    process_set.process_set_id = None
    return True


def _registered_with_ranks(ranks):
    """The registered set (the global one included) whose ranks are ``ranks``, else None."""
    if ranks == global_process_set.ranks:
        return global_process_set
    with _lock:
        return next((ps for ps in _by_id.values() if ps.ranks == ranks), None)


def register_initial(process_sets_arg):
    """``init(process_sets=...)``: registers each set in order (ids 1..k). ``"dynamic"``
    (Horovod's switch for run-time adds) and None register nothing.

    Raises:
      ValueError: an entry that duplicates the global set or an earlier entry, naming its
        index as Horovod's ``init`` does (the entries before it stay registered).
    """
    if process_sets_arg is None or process_sets_arg == "dynamic":
        return
    for index, ps in enumerate(process_sets_arg):
        try:
            add_process_set(ps)
        except ValueError as e:
            if "duplicate" not in str(e):
                raise
            raise ValueError(f"tfring could not be initialized because process_sets entry number {index} is a "
                             f"duplicate: {e}") from e


def reset():
    """Forgets every set (called by ``shutdown()``; the core's table went with the runtime)."""
    with _lock:
        for ps in _by_id.values():
            ps.process_set_id = None
        _by_id.clear()
        _next_id[0] = 1
