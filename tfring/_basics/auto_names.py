"""Automatic negotiation names for calls made without a ``name``: one home for every API.

A name is the negotiation key of a collective: equal on every rank, unique while in flight.
``next_name("allreduce")`` returns ``"allreduce.0"``, then ``"allreduce.1"``... per kind, so
ranks that make their unnamed calls in the same order agree. The counters start again at
``shutdown()``: a re-``init()`` in the same process names its calls as a fresh process
would, on every rank. Thread-safe. (Names of ops inside a TF graph are their scoped op
names instead: ``tfring._tensorflow.naming``.)
"""

import itertools
import threading

_counters = {}
_lock = threading.Lock()


def next_name(kind):
    """The next automatic name for `kind` (e.g. ``"allreduce"``, ``"RingStrategy.broadcast"``)."""
    with _lock:
        counter = _counters.setdefault(kind, itertools.count())
        return f"{kind}.{next(counter)}"


def reset():
    """Starts every counter again (called by ``shutdown()``)."""
    with _lock:
        _counters.clear()
