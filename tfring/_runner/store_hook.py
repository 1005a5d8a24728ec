"""A Python caller's hook into a launcher's store (``launch(store_hook=...)``): tfring.run
puts the function there before any worker starts and reads the ranks' reports after the
last one has ended, before the store stops.
"""

import contextlib


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
