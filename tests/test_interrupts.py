"""tfring's SIGINT handler (tfring/_interrupts.py), in one process without TensorFlow: a
SIGINT that comes while an exception's ``__init__`` runs becomes one KeyboardInterrupt once
the exception was built (the multi-process case, Ctrl-C in a TensorFlow collective, is
tests/test_tf_errors.py::test_ctrl_c_in_a_collective_is_one_keyboard_interrupt)."""

import signal
import sys

import pytest

from tfring import _interrupts as interrupts


class _SignalledWhileBuilt(Exception):
    def __init__(self):
        signal.raise_signal(signal.SIGINT)  # Python runs the handler right after this call
        self.built = True
        super().__init__("built")


def _build():
    return _SignalledWhileBuilt()


@pytest.fixture
def handler():
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    interrupts.install()
    yield signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, previous)
    sys.setprofile(None)


def test_installs_only_over_pythons_default_handler(handler):
    assert handler is interrupts._on_sigint
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    interrupts.install()
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_sigint_while_an_exception_is_built_comes_after_it(handler):
    with pytest.raises(KeyboardInterrupt) as info:
        _build()
    assert info.value.__suppress_context__
    assert info.traceback[-1].name == "_raise_once_built"  # raised once __init__ had returned
    assert sys.getprofile() is None


def test_sigint_elsewhere_is_a_plain_keyboard_interrupt(handler):
    with pytest.raises(KeyboardInterrupt) as info:
        signal.raise_signal(signal.SIGINT)
    assert info.traceback[-1].name == "_on_sigint"
    assert sys.getprofile() is None
