"""The launcher's one supervision loop, for the static job (``supervisor.Job``) and the
elastic one (``ElasticJob``, tfring/_elastic/driver.py): it forwards the launcher's signals,
hands over each worker's exit as it happens, and between exits gives the job a tick (every
``TICK_S`` at most) for its timers. What each event means is the job's policy.

A job passed to ``supervise`` has four methods, all called on the loop's thread:
  on_signal(signum)      the launcher received ``signum``
  over()                 True once supervision is done (checked after every signal round)
  on_exit(worker, code)  ``worker``'s process exited with ``code`` (``Popen.returncode``)
  on_tick()              no exit for up to ``TICK_S``; True stops supervising at once (a
                         worker survived SIGKILL: the launcher gives up on it)

Thread-safety: ``ExitQueue.watch`` starts one daemon thread per worker that only waits for
its process and queues the exit; ``supervise`` runs on the main thread (the one the
``SignalRelay`` serves).
"""

import queue
import threading

TICK_S = 0.05


class ExitQueue:
    """The workers' exits, in the order they happen."""

    def __init__(self):
        self._exits = queue.Queue()

    def watch(self, worker, name):
        """Queues ``(worker, worker.proc.wait())`` from a daemon thread named ``name``."""
        threading.Thread(target=lambda: self._exits.put((worker, worker.proc.wait())), daemon=True,
                         name=name).start()

    def take(self, timeout):
        """The next ``(worker, code)``, or None when none came within ``timeout`` seconds."""
        try:
            return self._exits.get(timeout=timeout)
        except queue.Empty:
            return None


def supervise(relay, exits, job):
    """Runs ``job`` (see the module docstring) until ``job.over()`` or ``job.on_tick()`` says
    to stop. ``relay``: the ``SignalRelay`` whose signals go to ``job.on_signal``; ``exits``:
    the ``ExitQueue`` watching the job's workers. Blocks at most ``TICK_S`` per round."""
    while True:
        for signum in relay.take():
            job.on_signal(signum)
        if job.over():
            return
        exited = exits.take(TICK_S)
        if exited is not None:
            job.on_exit(*exited)
            continue
        if job.on_tick():
            return
