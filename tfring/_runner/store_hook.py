"""The job's store for the length of a launch (``serving``), static and elastic alike, and a
Python caller's hook into it (``launch_job(store_hook=...)``): tfring.run puts the function
there before any worker starts and reads the ranks' reports after the last one has ended,
before the store stops.
"""

import contextlib
import sys

from tfring import _errors as errors
from tfring._runner.rendezvous import Store

STORE_STOP_S = 5.0
DRAIN_OUTPUT_S = 2.0


class StoreBindError(Exception):
    """The job's store cannot listen where the launcher planned (a usage error: exit 2)."""


def enter(store_hook, store, stop):
    """Enters ``store_hook(store)`` (a context manager; None: nothing) and returns the
    function that exits it. When entering raises, ``stop()`` (stop the store, close the
    output) runs before the error propagates."""
    hooked = store_hook(store) if store_hook is not None else contextlib.nullcontext()
    try:
        hooked.__enter__()
    except BaseException:
        stop()
        raise
    return lambda: hooked.__exit__(None, None, None)


@contextlib.contextmanager
def serving(bind, store_hook, output, verbose=False):
    """Serves the job's store on ``bind`` for the block and yields it, with
    ``store_hook(store)`` entered (``enter``). On the way out, whatever ended the block:
    the hook exits, then the store stops (``STORE_STOP_S`` at most) and ``output`` closes
    (``DRAIN_OUTPUT_S`` at most; with ``verbose``, streams still open are counted).

    Raises:
      StoreBindError: the store cannot listen on ``bind`` (nothing was entered).
    """
    try:
        store = Store(bind, 0)
    except errors.TfringError as e:
        raise StoreBindError(f"cannot serve the job's store on {bind}: {e}") from e
    leave_hook = enter(store_hook, store, lambda: (store.stop(STORE_STOP_S), output.close(timeout=DRAIN_OUTPUT_S)))
    try:
        yield store
    finally:
        try:
            leave_hook()
        finally:
            store.stop(STORE_STOP_S)
        left = output.close(timeout=DRAIN_OUTPUT_S)
        if left and verbose:
            print(f"tfringrun: {left} output stream(s) still open (kept by a process the "
                  "workers started); not waiting for them", file=sys.stderr, flush=True)
