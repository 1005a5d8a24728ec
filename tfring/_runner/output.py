"""Worker output: every line a worker writes is copied to the launcher's stdout or stderr
with its rank in front (``[1]<stdout>: text``), and optionally to ``DIR/rank.N.log``.

One daemon thread per worker stream reads its pipe as data arrives (up to 64 KiB at a
time), so a silent or chatty rank never blocks the others or the launcher. ``close()``
waits a bounded time for the pipes to drain: a grandchild that inherited a pipe and
keeps it open cannot hold the launcher up.

Pieces are forwarded as they end, at a newline or at a carriage return: a progress bar
that redraws itself with ``\r`` (Keras' ``fit``) updates live on the launcher's console,
each redraw with its rank prefix in front (``\r`` returns to the line's start, so the
prefix is redrawn too). A piece with neither waits for its end (at most 64 KiB). Pieces
are written whole under one lock; when another rank or stream writes while a redrawn line
is open, that line is ended first, so output never interleaves mid-line. Log files get the
worker's bytes as they were (unprefixed); the observer sees complete lines only.
"""

import os
import sys
import threading
import time

MAX_LINE = 64 * 1024


def _split_pieces(text):
    """Splits ``text`` after every \n and \r (a \r\n pair stays one end): returns the
    finished pieces and the unfinished rest. A rest of MAX_LINE characters or more is a
    piece of its own (a very long line goes out in parts)."""
    pieces, start, i = [], 0, 0
    while i < len(text):
        c = text[i]
        if c == "\n" or (c == "\r" and i + 1 < len(text) and text[i + 1] != "\n"):
            pieces.append(text[start:i + 1])
            start = i + 1
        elif c == "\r" and i + 1 == len(text):
            break  # a \r at the very end may be the start of \r\n: wait for the next byte
        i += 1
    rest = text[start:]
    if len(rest) >= MAX_LINE:
        pieces.append(rest)
        rest = ""
    return pieces, rest


class Output:
    """Merges the workers' output into the launcher's console and log files.

    Args:
      log_dir: if set, each rank's output is also written (unprefixed, both streams in
        arrival order) to ``log_dir/rank.N.log``; the directory is created.
      stdout, stderr: text streams for the console (default: sys.stdout / sys.stderr).
      observer: optional ``observer(rank, text)`` called with every line (from the
        reader threads), e.g. ``Blame.observe``.

    Raises:
      ValueError: ``log_dir`` cannot be created.
    """

    def __init__(self, log_dir=None, stdout=None, stderr=None, observer=None):
        self._observer = observer
        self._console = {"stdout": stdout or sys.stdout, "stderr": stderr or sys.stderr}
        self._lock = threading.Lock()
        self._threads = {}  # rank -> reader threads
        self._open_line = None  # (rank, stream) whose last piece ended in \r, under the lock
        self._logs = {}
        self._closed = False
        self._log_dir = log_dir
        if log_dir:
            try:
                os.makedirs(log_dir, exist_ok=True)
            except OSError as e:
                raise ValueError(f"--output-filename {log_dir}: cannot create it: {e.strerror}") from None

    def attach(self, rank, stream, pipe):
        """Starts copying ``pipe`` (a binary file of the worker's ``stream``: "stdout" or
        "stderr") until it closes. Non-blocking."""
        if self._log_dir and rank not in self._logs:
            path = os.path.join(self._log_dir, f"rank.{rank}.log")
            # Lives until close(); written by this rank's two reader threads under the lock.
            self._logs[rank] = open(path, "w", encoding="utf-8", errors="replace",  # noqa: SIM115
                                    buffering=1)
        t = threading.Thread(target=self._pump, args=(rank, stream, pipe), daemon=True,
                             name=f"tfringrun-rank{rank}-{stream}")
        t.start()
        self._threads.setdefault(rank, []).append(t)

    def message(self, text):
        """Writes one of the launcher's own lines, ``tfringrun: text``, to stderr."""
        with self._lock:
            self._write_console("stderr", f"tfringrun: {text}\n")

    def drain(self, ranks, timeout):
        """Waits up to ``timeout`` seconds for the pipes of ``ranks`` to reach their end.
        Returns how many of their streams are still open."""
        deadline = time.monotonic() + timeout
        threads = [t for r in ranks for t in self._threads.get(r, ())]
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        return sum(t.is_alive() for t in threads)

    def close(self, timeout):
        """Waits up to ``timeout`` seconds for every pipe to reach its end, then stops
        copying and closes the log files. Returns how many streams were still open."""
        left = self.drain(list(self._threads), timeout)
        with self._lock:
            self._closed = True
            for f in self._logs.values():
                f.close()
        for stream in self._console.values():
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        return left

    def _pump(self, rank, stream, pipe):
        pending = ""  # text after the last \n or \r, waiting for its end
        line = ""  # the current line's text so far (for the observer)
        try:
            fd = pipe.fileno()
            while True:
                chunk = os.read(fd, MAX_LINE)
                if not chunk:
                    break
                pending += chunk.decode("utf-8", errors="replace")
                pieces, pending = _split_pieces(pending)
                for piece in pieces:
                    line = self._piece(rank, stream, piece, line)
            if pending:
                self._piece(rank, stream, pending + "\n", line)
        except (OSError, ValueError):
            pass
        finally:
            try:
                pipe.close()
            except OSError:
                pass

    def _piece(self, rank, stream, piece, line):
        """Forwards one piece ending in \n or \r; returns the observer's line so far."""
        ends_line = piece.endswith("\n")
        if ends_line:
            line = ""
            if self._observer is not None:
                self._observer(rank, piece)
        with self._lock:
            if self._closed:
                return line
            log = self._logs.get(rank)
            if log is not None:
                log.write(piece)
            key = (rank, stream)
            if self._open_line is not None and self._open_line != key:
                self._write_console(self._open_line[1], "\n")  # end the other redrawn line
                self._open_line = None
            self._write_console(stream, f"[{rank}]<{stream}>: {piece}")
            self._open_line = None if ends_line else key
        return line

    def _write_console(self, stream, text):
        console = self._console[stream]
        if console is None:
            return
        try:
            console.write(text)
            console.flush()
        except (OSError, ValueError):  # closed or broken console (e.g. `| head`): keep logs going
            self._console[stream] = None
