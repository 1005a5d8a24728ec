"""Which rank writes a checkpoint that every rank asks for, and how the others wait.

The protocol (docs/strategy.md, "Checkpoints"): the writer (rank 0, or a callback's
``root_rank``) publishes in the job's store, for each coordinated save, a *start* record
before it writes and a *done* record (ok, or its error text) after. It never waits for
anyone, so a save that only the writer makes (``if strategy.extended.should_checkpoint:``)
never blocks. Another rank making the same save writes nothing there and, after running
the save's bookkeeping (counters, ``CheckpointManager`` lists), waits for the writer's
*done* record of that save, then returns or raises the writer's error.

Saves are matched per path: a rank's n-th save of path P pairs with the writer's n-th save
of P. To tell a shared path from a per-rank one (``f"ckpt-{rank}.keras"``, or the
per-worker temporary directories of ``MultiWorkerMirroredStrategy`` scripts), each rank
also counts its coordinated saves: when the writer's k-th save has another path than this
rank's k-th (and, once that save is done, the writer does not start this path within a
grace: a save only the writer made earlier puts its count ahead), the path is this rank's
own and this rank writes it itself (atomically), then
waits for the writer's k-th save to complete: a ``MultiWorkerMirroredStrategy`` script
saves its own temporary copy on a non-chief worker and reads the chief's file right after
(TF's multi-worker tutorial), which ``MultiWorkerMirroredStrategy``'s collective saves
order and a rank writing alone would not. A save the writer never makes times out (``TFRING_TIMEOUT_S``) with an error naming the
path, the ranks and the fix (``local_save()``).

Blocking: the writer never blocks on other ranks; the others block at most
``TFRING_TIMEOUT_S`` for the writer to start and again for it to finish (a rank writing its
own path: for the writer's save made at the same point to finish).
Thread-safety: the current role is per thread; counters are guarded by a lock.
"""

import contextlib
import json
import os
import threading
import time

from tfring import _core
from tfring import _errors as errors
from tfring._saving import writer_error

WRITER = "writer"  # writes the user's path, publishes start/done
WAITER = "waiter"  # writes nothing, waits for the writer's done record
OWN = "own"  # a path only this rank saves: written here, nothing published
LOCAL = "local"  # local_save(): written here, no coordination at all

_POLL_S = 0.05
_OWN_GRACE_S = 0.5  # after the writer's save at this count is done, for it to start this path
_OWN_WAIT_S = 3.0  # at most, before a rank concludes that its path is its own
_local = threading.local()
_lock = threading.Lock()
_per_path = {}  # (writer, path) -> saves so far
_ordinal = {}  # writer -> coordinated saves so far


class SaveAbortedError(errors.AbortedError, OSError):
    """The writer of a coordinated save failed; this rank's save is abandoned with it.

    What a waiting rank raises is an instance of a class derived from both the writer's
    exception class and this one, named as the writer's and carrying the writer's message
    (``writer_error.py``): ``except ValueError`` around ``model.save(...)`` catches it on
    every rank as in one process. This class alone (a ``tfring.errors.AbortedError``, also
    an ``OSError``) when the writer's class is unknown here.
    """


def current_role():
    """The role of the coordinated save running on this thread, or None outside one."""
    return getattr(_local, "role", None)


@contextlib.contextmanager
def _role(role):
    previous = current_role()
    _local.role = role
    try:
        yield role
    finally:
        _local.role = previous


@contextlib.contextmanager
def local_save():
    """Within this block, saves on this thread are written by this rank alone, without
    coordination (no waiting, nothing published): for a file that only this rank writes,
    e.g. ``if tfring.rank() == 1: model.save("rank1.keras")``.

    Example:
      ``with tfring.saving.local_save(): model.save(f"/local/ckpt-{rank}.keras")``
    """
    with _role(LOCAL):
        yield


def normalize(path):
    """The key of a path: absolute, normalized (remote URLs kept as they are)."""
    path = os.fspath(path)
    return path if "://" in path else os.path.abspath(path)


def _timeout():
    from tfring import _core

    return float(_core.config().get("TFRING_TIMEOUT_S", ("30",))[0])


def _store():
    from tfring._saving.job_store import job_store

    return job_store("tfring.saves/")


def _next_counts(writer, path):
    with _lock:
        n = _per_path.get((writer, path), 0) + 1
        _per_path[(writer, path)] = n
        k = _ordinal.get(writer, 0) + 1
        _ordinal[writer] = k
    return n, k


def _describe(what, path):
    return f"{what} of {path!r}"


@contextlib.contextmanager
def coordinated_save(path, what, writer=0):
    """Runs one save in a coordinated scope; yields this rank's role.

    Roles: ``WRITER`` (write ``path``, atomically), ``WAITER`` (write nothing; the body
    should still update in-memory bookkeeping), ``OWN``/``LOCAL`` (write it here), or None
    (one process, or tfring not initialized: behave as without tfring). Nested scopes
    (a save inside a save) take the outer role. On exit, the writer publishes its outcome
    and a waiter waits for it.

    Raises (on a waiter, after its body):
      the writer's exception class (derived from it and SaveAbortedError), with the
        writer's message: the writer's save failed (``writer_error.py``).
      tfring.errors.TimeoutError: the writer did not start or finish within
        ``TFRING_TIMEOUT_S``.
    """
    outer = current_role()
    if outer is not None:
        yield outer
        return
    from tfring import _core

    if not _core.is_initialized() or _core.size() == 1:
        yield None
        return
    rank = _core.rank()
    key = normalize(path)
    n, k = _next_counts(writer, key)
    store = _store()
    record_key = f"{writer}/{key}/{n}"
    if rank == writer:
        store.set(f"{writer}/#{k}", json.dumps({"path": key, "n": n}).encode())
        store.set(f"start/{record_key}", b"1")
        try:
            with _role(WRITER):
                yield WRITER
        except BaseException as e:
            store.set(f"done/{record_key}", json.dumps(writer_error.describe(e)).encode())
            if hasattr(e, "add_note"):
                e.add_note(f"tfring: rank {rank} was writing {key!r} for every rank ({what}); the other "
                           "ranks that made this save get this error too")
            raise
        store.set(f"done/{record_key}", b"{}")
        return
    role, theirs = _decide(store, writer, rank, key, n, k, what)
    with _role(role):
        yield role
    if role == WAITER:
        _wait_done(store, writer, rank, key, n, _describe(what, key))
    elif role == OWN:  # the writer's save made at the same point is complete when this one returns
        _wait_done(store, writer, rank, theirs["path"], theirs["n"],
                   f"save of {theirs['path']!r} (made while this rank saved its own {key!r})", own=True)


def _decide(store, writer, rank, key, n, k, what):
    """``(WAITER, None)`` when the writer makes this save too, ``(OWN, {"path", "n"} of the
    writer's k-th save)`` when its k-th save is another path.

    The writer's k-th save having another path is not proof at once: a save that only the
    writer made earlier (``if rank == 0: model.save(...)``) puts its count ahead, and it may
    be about to start this very path. So OWN is decided only once the writer's k-th save is
    done and ``_OWN_GRACE_S`` more went by without this path starting, or after
    ``_OWN_WAIT_S`` in all (the writer's save may need this rank's body to finish)."""
    deadline = time.monotonic() + _timeout()
    theirs = None
    other_seen = None  # when the writer's k-th save was first seen to be another path
    done_seen = None  # when that save was first seen done
    while True:
        broken = _job_broken_error()
        try:  # a writer that started this save and then ended still decides it
            started = store.try_get(f"start/{writer}/{key}/{n}", _POLL_S if broken is None else 0.05)
        except errors.TfringError:
            if broken is None:
                raise
            started = None
        if started is not None:
            return WAITER, None
        if broken is not None:
            raise broken
        if theirs is None:
            raw = store.try_get(f"{writer}/#{k}", 0.001)
            theirs = json.loads(raw) if raw is not None else None
        if theirs is not None and theirs["path"] != key:
            now = time.monotonic()
            other_seen = other_seen or now
            if done_seen is None and store.try_get(f"done/{writer}/{theirs['path']}/{theirs['n']}", 0.001):
                done_seen = now
            if (done_seen is not None and now - done_seen > _OWN_GRACE_S) or now - other_seen > _OWN_WAIT_S:
                return OWN, theirs
        if time.monotonic() > deadline:
            raise errors.TimeoutError(
                f"rank {rank}: the {_describe(what, key)} waits for rank {writer}, which writes every "
                f"rank's checkpoints, but rank {writer} made no matching save (its save #{n} of this path) "
                f"within {_timeout():g} s (TFRING_TIMEOUT_S). Make the same save on rank {writer} (every "
                f"rank runs the same saves, or only rank {writer} saves), or write a file that only this "
                "rank saves inside `with tfring.saving.local_save():`.")


def _job_broken_error():
    """The runtime's error once the job is broken (the writer died, froze or failed: the
    runtime's heartbeats and connections tell), as the matching tf.errors class (a lost
    writer: UnavailableError naming it); None while it is whole."""
    try:
        _core.check_health()
    except errors.TfringError as e:
        from tfring._tensorflow.errors import to_tf_error

        error = to_tf_error(e)
        error.__cause__ = e
        return error
    return None


def _wait_done(store, writer, rank, key, n, description, own=False):
    """Waits for the writer's *done* record of its n-th save of ``key``; raises its error
    unless ``own`` (this rank wrote its own path: the writer reports its own failure)."""
    deadline = time.monotonic() + _timeout()
    while True:
        broken = _job_broken_error()
        # The writer may have posted its outcome and then ended (an orderly shutdown breaks
        # the job too): read the outcome once more before blaming the job.
        try:
            raw = store.try_get(f"done/{writer}/{key}/{n}", 0.2 if broken is None else 0.05)
        except errors.TfringError:
            if broken is None:
                raise
            raw = None  # the store went with the writer
        if raw is not None:
            outcome = json.loads(raw)
            if "type" in outcome and not own:
                error = writer_error.rebuild(outcome, SaveAbortedError)
                error.add_note(f"tfring: rank {rank} wrote nothing: the {description} failed on rank {writer}, "
                               "which writes it for every rank; this is rank "
                               f"{writer}'s error (every rank that made this save raises it)")
                raise error
            return
        if broken is not None:
            raise broken
        if time.monotonic() > deadline:
            raise errors.TimeoutError(
                f"rank {rank}: rank {writer} started the {description} but did not finish it within "
                f"{_timeout():g} s (TFRING_TIMEOUT_S); raise TFRING_TIMEOUT_S if writing it takes longer")


@contextlib.contextmanager
def as_writer():
    """Marks this thread as writing for every rank (a callback's root writing its file), so
    that saves inside are written atomically here without being coordinated again."""
    with _role(WRITER):
        yield
