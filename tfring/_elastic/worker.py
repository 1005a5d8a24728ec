"""An elastic worker's side of the rendezvous: which generation to join, and as which rank.

``tfring.init()`` calls ``join_settings()`` when the process was started by an elastic
driver (``TFRING_ELASTIC_WORKER`` set): it waits for a generation newer than the last one
this process joined that includes it, and returns the init settings of its assignment
(identity and the generation's job id). See protocol.py for the keys.

Blocking, bounded by ``TFRING_ELASTIC_TIMEOUT_S`` (set by the driver to its own wait for
enough workers, plus a margin). Thread-safety: called from ``init()`` only.
"""

import os
import re
import sys
import time

from tfring import _core
from tfring import _errors as errors
from tfring._bootstrap import launch_env
from tfring._elastic import protocol
from tfring._elastic.exceptions import JobEndedError, describe
from tfring._runner import blame

POLL_S = 0.05
DEFAULT_TIMEOUT_S = 630.0
_joined = 0  # the generation this process joined last (0: none)
_trained = False  # a rendezvous of this process succeeded once (it took part in the job)
_client = None
_lost = []  # ranks of the joined generation that this worker, its rank 0, lost (note_lost)
# The roster's "no roster entry from rank(s) 2, 3 (and N more)": ranks that never reached the
# store in a rendezvous (roster.cc).
_MISSING = re.compile(r"no roster entry from rank\(s\) ([\d, ]+)")


def worker_id(environ=None):
    """This process's elastic worker id, or None when it is not an elastic worker."""
    return launch_env.elastic_worker_id(environ)


def joined_generation():
    """The generation of the elastic job this process joined last (0 before the first, and
    outside an elastic job)."""
    return _joined


def _store():
    global _client
    if _client is None:
        address = os.environ.get("TFRING_STORE_ADDR", "")
        secret = os.environ.get("TFRING_SECRET", "")
        if not address or not secret:
            raise errors.PreconditionError(
                f"{protocol.WORKER_ENV} is set but TFRING_STORE_ADDR or TFRING_SECRET is not: an elastic "
                "worker is started by tfringrun --min-np/--max-np/--host-discovery-script, which sets them")
        _client = _core.StoreClient(*launch_env.split_store_address(address), secret, 30.0)
    return _client


def current_generation():
    """The latest generation the driver published (a store read, no wait)."""
    return _store().add(protocol.CURRENT, 0)


def _check_not_ended(store):
    """Raises JobEndedError once the driver has ended the job. A worker that never joined
    a generation of a job that *finished* (a worker completed training) has nothing to do:
    it says so in one line and exits 0 (``SystemExit(0)``) instead."""
    if store.add(protocol.ENDED, 0):
        reason = store.get(protocol.END_REASON, 5.0).decode(errors="replace")
        if store.add(protocol.FINISHED, 0) and not _trained:
            print(f"tfring elastic: worker {worker_id()}: the job finished before this worker joined it "
                  f"({reason}); leaving without training", file=sys.stderr, flush=True)
            raise SystemExit(0)
        raise JobEndedError(f"the elastic driver ended the job: {reason}")


def join_settings(timeout_s=None):
    """Waits for the next generation that includes this worker; returns its init settings.

    Raises:
      JobEndedError: the driver ended the job, left this worker out of the newest
        generation (it stops such workers itself), or published no new generation within
        the timeout.
      SystemExit(0): the job finished before this worker ever joined it (``_check_not_ended``).
    """
    global _joined
    me = worker_id()
    if timeout_s is None:
        timeout_s = float(os.environ.get("TFRING_ELASTIC_TIMEOUT_S", DEFAULT_TIMEOUT_S))
    store = _store()
    if _joined == 0:
        store.add(protocol.ready_key(me), 1)  # the driver may now put this worker in a generation
    deadline = time.monotonic() + timeout_s
    checked = _joined  # generations up to this one do not include this worker
    while True:
        _check_not_ended(store)
        generation = store.add(protocol.CURRENT, 0)
        if generation > checked:
            checked = generation
            try:
                data = store.get(protocol.assignment_key(generation, me), POLL_S)
            except errors.TimeoutError:
                if _joined == 0:
                    continue  # a new worker: a generation formed before it was ready; wait for the next
                store.add(protocol.left_key(me), 1)  # a departure, not a loss (the driver reads it at the exit)
                raise JobEndedError(f"worker {me} is not part of generation {generation} of the job "
                                    "(the driver removed it: its host is no longer listed)") from None
            assignment = protocol.Assignment.decode(data)
            _joined = generation
            base = os.environ.get("TFRING_JOB_ID", "default")
            slot = assignment.slot
            print(f"tfring elastic: worker {me} joins generation {generation} as rank {slot.rank} of "
                  f"{slot.size} (host {slot.host})", file=sys.stderr, flush=True)
            return assignment.settings(base)
        if time.monotonic() > deadline:
            raise JobEndedError(
                f"worker {me} waited {timeout_s:g} s for generation {_joined + 1} of the elastic job "
                "(TFRING_ELASTIC_TIMEOUT_S); the driver published none")
        time.sleep(POLL_S)


def note_lost(rank, message):
    """Remembers the ranks that ``message`` (this rank's runtime failure) reports lost, when
    this worker is ``rank`` 0 of its generation: ``report_broken`` tells the driver, which
    leaves them out of the next generation (rank 0 watches every rank's heartbeats; on a
    partition, its side holds the job)."""
    global _lost
    _lost = sorted(blame.lost_ranks(message) - {0}) if rank == 0 else []


def note_missing(rank, message):
    """Like ``note_lost`` for a failed rendezvous: on ``rank`` 0 of the generation, the ranks
    that ``message`` says never reached the store (a partition that cut them off from the
    store and rank 0): the driver leaves them out of the next generation instead of
    publishing them again into rendezvous that wait TFRING_START_TIMEOUT_S for them."""
    global _lost
    m = _MISSING.search(message) if rank == 0 else None
    _lost = sorted({int(r) for r in m.group(1).replace(" ", "").split(",") if r} - {0}) if m else []


def report_broken():
    """Tells the driver that the generation this worker joined cannot go on (it lost a
    member, or its rendezvous failed), so it re-forms the job even when no process exited;
    first, on rank 0, which ranks it lost (``note_lost``)."""
    global _lost
    if _joined:
        store = _store()
        for rank in _lost:
            store.add(protocol.lost_key(_joined, rank), 1)
        _lost = []
        store.add(protocol.broken_by_key(_joined, worker_id()), 1)
        store.add(protocol.broken_key(_joined), 1)


def init_core(core_init):
    """Joins the next generation that includes this worker and calls ``core_init(settings)``
    for it; when that rendezvous fails (a member died or froze during it, or did not come in
    TFRING_START_TIMEOUT_S), reports the generation broken and joins the next one.

    Raises:
      JobEndedError: from ``join_settings``; errors of the store itself propagate too.
      SystemExit(0): from ``join_settings``, when the job finished before this worker
        joined it.
    """
    global _trained
    while True:
        settings = join_settings()
        try:
            core_init(settings)
        except errors.TfringError as e:
            print(f"tfring elastic: the rendezvous of generation {_joined} failed ({describe(e)}); "
                  "waiting for the next one", file=sys.stderr, flush=True)
            note_missing(int(settings.get("TFRING_RANK", -1)), str(e))
            report_broken()
            continue
        # Before any collective: a peer that finishes has then seen this worker joined, so
        # the driver never takes a member for a late joiner (driver.py).
        _store().add(protocol.joined_key(worker_id()), 1)
        _trained = True
        return


def reset_for_tests():
    global _joined, _client, _trained, _lost
    _joined, _client, _trained, _lost = 0, None, False, []
