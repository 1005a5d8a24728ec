"""Signals sent to the launcher (Ctrl-C, ``kill``, a closed terminal) become events for the
supervisor loop instead of killing the launcher, so it can pass them on to the workers and
still clean up.

Thread-safety: install and restore from the main thread (Python runs signal handlers
there); ``take()`` may be called from any thread.
"""

import collections
import signal

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class SignalRelay:
    """Context manager that records SIGINT, SIGTERM and SIGHUP while active.

    Example:
      with SignalRelay() as relay:
          ...
          for signum in relay.take():
              forward(signum)
    """

    def __init__(self, signals=FORWARDED):
        self._signals = signals
        self._pending = collections.deque()
        self._previous = {}
        self.received = []  # every signal received so far, in order

    def __enter__(self):
        for s in self._signals:
            self._previous[s] = signal.signal(s, self._handle)
        return self

    def __exit__(self, *exc):
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        self._previous.clear()
        return False

    def _handle(self, signum, frame):
        self._pending.append(signum)
        self.received.append(signum)

    def take(self):
        """The signals received since the last call, oldest first."""
        out = []
        while self._pending:
            out.append(self._pending.popleft())
        return out


def signal_name(signum):
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
