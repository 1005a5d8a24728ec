"""Ctrl-C (SIGINT) in a rank that waits in a collective: one clean KeyboardInterrupt.

Python runs a signal's handler on the main thread, at the next point where it runs Python
code. When SIGINT reaches a rank blocked in TensorFlow (a tfring collective op, eager or in
a tf.function), that call usually ends with an error at once, because the launcher passed
the signal to every rank and the others are leaving (FailedPreconditionError "rank 1 has
shut down", AbortedError). TensorFlow's bindings set that error as a class and its
arguments, and before returning pybind11 (Python < 3.12) builds the exception object,
running its Python ``__init__``: there Python's default handler raises KeyboardInterrupt,
and pybind11, seeing the type change under it, raises ``RuntimeError:
pybind11::error_already_set: MISMATCH of original and normalized active exception types:
ORIGINAL AbortedError REPLACED BY KeyboardInterrupt``.

``install()`` (``tfring.init()`` calls it) replaces Python's default SIGINT handler, on the
main thread only, with one that raises KeyboardInterrupt as it does, except while an
exception's ``__init__`` runs: there it only sets a profile function (``sys.setprofile``)
that raises the KeyboardInterrupt at the first call or return outside such an ``__init__``
(when the exception was built and the code that got it runs on), in its place (``from
None``: one message, not "During handling of the above exception, another exception
occurred"), and removes itself. Asking for the signal again from the handler instead
(``_thread.interrupt_main``) would run the handler again at once, still inside
``__init__``. While another profile function is set (a profiler), the handler raises at
once, as Python's does. A handler that the program set is left alone, and one it sets
later replaces this one.
"""

import signal
import sys
import threading


def _building_an_exception(frame):
    """Whether ``frame`` or a caller of it is the ``__init__`` of an exception."""
    while frame is not None:
        if frame.f_code.co_name == "__init__" and isinstance(frame.f_locals.get("self"), BaseException):
            return True
        frame = frame.f_back
    return False


def _raise_once_built(frame, event, arg):
    """The profile function while a SIGINT is put off: at the first event outside an
    exception's ``__init__``, removes itself and raises KeyboardInterrupt."""
    if _building_an_exception(frame):
        return
    sys.setprofile(None)
    raise KeyboardInterrupt from None  # in place of the exception it was put off for


def _on_sigint(signum, frame):
    """Python's default SIGINT handler (raise KeyboardInterrupt), put off while an exception
    is built (module docstring)."""
    if _building_an_exception(frame) and sys.getprofile() is None:
        sys.setprofile(_raise_once_built)
        return
    raise KeyboardInterrupt


def install():
    """Installs the handler when SIGINT has Python's default one; a no-op off the main
    thread (Python sets handlers there only) and when already installed."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_sigint)
