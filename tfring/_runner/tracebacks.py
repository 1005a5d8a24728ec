"""The uncaught exception each rank printed, for the launcher's exit report.

When every rank fails with the same error, the first to exit ends the job and the launcher
stops the others with SIGTERM after ``DRAIN_S``; one that had already printed its own
traceback, and was only slow to finish exiting (TensorFlow's teardown takes seconds), would
be reported as ``SIGTERM``. ``Tracebacks`` reads the workers' output for Python's
``Traceback (most recent call last):`` blocks and keeps, per rank, the exception line that
ends the last one (``ValueError: boom``) and when it was seen, so the report can say
"rank 0: ValueError: boom (then SIGTERM while exiting)".

A block ends at its first line that does not start with whitespace, skipping the lines
that join chained exceptions. Thread-safety: ``observe`` is called from the output reader
threads, ``last`` from the supervisor; both take the lock.
"""

import threading
import time

_START = "Traceback (most recent call last):"
_CHAINS = ("During handling of the above exception", "The above exception was the direct cause")
MAX_CHARS = 160  # of an exception line in the report


class Tracebacks:
    def __init__(self):
        self._lock = threading.Lock()
        self._open = set()  # ranks inside a traceback block
        self._last = {}  # rank -> (exception line, monotonic time seen)

    def observe(self, rank, text):
        """Reads one line of ``rank``'s output."""
        line = text.rstrip("\r\n")
        with self._lock:
            if line.startswith(_START):
                self._open.add(rank)
            elif rank in self._open and line and not line[0].isspace() and not line.startswith(_CHAINS):
                self._open.discard(rank)
                short = line if len(line) <= MAX_CHARS else line[:MAX_CHARS - 3] + "..."
                self._last[rank] = (short, time.monotonic())

    def last(self, rank, before=None):
        """The exception line of ``rank``'s last traceback, seen before monotonic time
        ``before`` (any time when None); None when it printed none."""
        with self._lock:
            seen = self._last.get(rank)
        if seen is None or (before is not None and seen[1] >= before):
            return None
        return seen[0]
