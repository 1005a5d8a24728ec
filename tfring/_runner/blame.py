"""Which failed rank caused the others to fail.

When one rank dies, the collectives of the others fail within milliseconds with a core
error that names it (``rank 1 is gone: its connection closed ...``, ``rank 1 has shut down
...``, ``rank 1 exited: uncaught ValueError: ...``, ``rank 1 (host h) has not answered for
30.0 s``), and they often exit *before* the dying rank has finished exiting (its interpreter
teardown takes as long as theirs). Exit order alone would then blame a survivor. ``Blame``
reads the workers' output for those messages and skips failures that were caused by the
loss of another failed rank.

Thread-safety: ``observe`` is called from the output reader threads, ``root_cause`` from
the supervisor; both take the lock.
"""

import re
import threading

# The core's wording (cc/core/runtime/job.cc); test_launcher.py pins it end to end.
_LOST_PEER = re.compile(r"\brank (\d+) (?:\(host [^)]*\) )?(?:is gone|has shut down|exited:|has not answered|was silent)")


def lost_ranks(text):
    """The ranks that a tfring error message ``text`` reports lost (dead, shut down,
    silent), e.g. {4} for ``rank 4 (host h2) has not answered for 2.0 s``."""
    return {int(m.group(1)) for m in _LOST_PEER.finditer(text)}


class Blame:
    def __init__(self):
        self._lock = threading.Lock()
        self._lost = {}  # rank -> ranks it reported lost

    def observe(self, rank, text):
        """Notes the peers that ``rank`` reports lost in one line of its output."""
        if "rank" not in text or "tfring" not in text:
            return
        peers = lost_ranks(text) - {rank}
        if peers:
            with self._lock:
                self._lost.setdefault(rank, set()).update(peers)

    def lost_by(self, rank):
        with self._lock:
            return set(self._lost.get(rank, ()))

    def root_cause(self, failures):
        """The failure to blame among ``failures`` (objects with ``.rank``, in exit order):
        the first one that did not report losing another failed rank. When every failure
        did (a partition: each side lost the other), the first one that rank 0 reported
        lost: rank 0 holds the job (its control and heartbeat stars), so the side without it
        is the one cut off. Else the first one."""
        failed = {f.rank for f in failures}
        for f in failures:
            if not self.lost_by(f.rank) & failed:
                return f
        by_rank_0 = self.lost_by(0)
        return next((f for f in failures if f.rank in by_rank_0), failures[0])
