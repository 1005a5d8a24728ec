"""Runs the workers of one job to the end and decides the launcher's exit code.

Policy:
- Every rank exits 0: the job succeeds (exit 0).
- A rank exits non-zero or is killed by a signal: the other ranks get ``DRAIN_S`` (at
  most the grace period) to exit by themselves, since a dead peer fails their collectives
  within milliseconds and the error they print names it. Then the launcher names the rank
  that failed first (``rank 1 (pid 1234) exited with code 1 first; stopping the other 2
  rank(s)``; failures caused by losing an already failed rank are skipped, see blame.py)
  and stops the rest: SIGTERM to each worker's process group, SIGKILL after the grace
  period. Exit code: that rank's code, or 128+N for signal N.
- The launcher gets SIGINT/SIGTERM/SIGHUP: the same signal goes to every worker's process
  group at once, SIGKILL follows after the grace period (a second signal sends SIGKILL at
  once). Exit code 128+N (130, 143, 129) unless a rank had failed before.
- Once every worker has exited, what is left of their process groups (grandchildren) gets
  SIGTERM, then SIGKILL after the grace period.
- A local worker stopped by a signal (SIGSTOP, SIGTSTP, ...: frozen, so its peers lose it)
  for ``stopped_limit_s`` (the job's TFRING_PEER_TIMEOUT_S) counts as failed, named as
  stopped; so does one still stopped when a survivor's error names it as lost. Its exit
  status is 128+N for stop signal N. Signals other than SIGKILL are followed by SIGCONT, so
  a stopped worker acts on them.

Every wait is bounded: if processes survive even SIGKILL for ``KILL_WAIT_S`` the launcher
says so and exits anyway. Thread-safety: ``start`` and ``run`` from the main thread; one
waiter thread per worker only reports its exit (supervision_loop.py, the loop the elastic
driver runs too).
"""

import dataclasses
import os
import signal
import time

from tfring._runner.signals import signal_name
from tfring._runner.stopped import stop_signal
from tfring._runner.supervision_loop import ExitQueue, supervise

DRAIN_S = 1.0
STOPPED_CHECK_S = 0.25
OUTPUT_SETTLE_S = 0.5
KILL_WAIT_S = 5.0
REAP_POLL_S = 0.05  # how often the leftover process groups are checked


def describe_exit(returncode):
    if returncode < 0:
        return f"was killed by signal {-returncode} ({signal_name(-returncode)})"
    return f"exited with code {returncode}"


def exit_status(returncode):
    """A shell-style exit status: the code itself, or 128+N for death by signal N."""
    return 128 - returncode if returncode < 0 else returncode


@dataclasses.dataclass
class Worker:
    slot: object
    proc: object
    started: float
    returncode: int = None

    @property
    def rank(self):
        return self.slot.rank

    @property
    def pid(self):
        return self.proc.pid


@dataclasses.dataclass(frozen=True)
class Failure:
    rank: int
    pid: int  # None when the worker could not be started
    returncode: int  # for a stopped worker: minus the stop signal
    stopped_s: float = None  # the worker has not exited: it has been stopped this long
    host: str = None  # a remote worker's host, with the ranks it runs: "h2 (ranks 4, 5)"
    reported_by: int = None  # a remote worker still running that this failed rank reported lost

    def describe(self):
        if self.pid is None:
            return f"rank {self.rank} could not be started (code {self.returncode})"
        where = f" on host {self.host}" if self.host else ""
        if self.stopped_s is not None:
            return (f"rank {self.rank} (pid {self.pid}){where} was stopped by {signal_name(-self.returncode)} "
                    f"{self.stopped_s:.1f} s ago (frozen: it cannot answer its peers)")
        if self.reported_by is not None:
            return (f"rank {self.rank} (pid {self.pid}){where} stopped answering its peers (rank "
                    f"{self.reported_by} reported it lost; its host is frozen, cut off or its network drops "
                    "packets)")
        return f"rank {self.rank} (pid {self.pid}){where} {describe_exit(self.returncode)}"


def killpg(pgid, signum):
    """Signals a process group; False when the group no longer exists."""
    try:
        os.killpg(pgid, signum)
        return True
    except (ProcessLookupError, PermissionError):  # gone (or the id now belongs to another user)
        return False


def signal_worker(worker, signum):
    """Signals a worker's process group: through its handle's ``signal_group`` when it has
    one (remote workers, see remote.py), else ``os.killpg``. False when it is gone."""
    signal_group = getattr(worker.proc, "signal_group", None)
    if signal_group is not None:
        return signal_group(signum)
    return killpg(worker.pid, signum)


def signal_and_resume(worker, signum):
    """``signal_worker``, then SIGCONT to a local worker's group for any signal but SIGKILL:
    a stopped worker acts on the signal only once resumed. False when it is gone."""
    sent = signal_worker(worker, signum)
    if sent and signum != signal.SIGKILL and not hasattr(worker.proc, "signal_group"):
        killpg(worker.pid, signal.SIGCONT)
    return sent


class _Stopper:
    """When to send which signal to the workers that are still running."""

    def __init__(self, grace_period_s):
        self.grace = grace_period_s
        self.pending = None  # (time, signum) of the next signal to send
        self.kill_sent_at = None

    @property
    def kill_scheduled(self):
        return self.pending is not None and self.pending[1] == signal.SIGKILL

    def schedule(self, now, signum, delay=0.0):
        if self.kill_sent_at is None:
            self.pending = (now + delay, signum)

    def due(self, now):
        """The signal to send now, if any; schedules the next step."""
        if self.pending is None or now < self.pending[0]:
            return None
        signum = self.pending[1]
        if signum == signal.SIGKILL:
            self.pending, self.kill_sent_at = None, now
        else:
            self.pending = (now + self.grace, signal.SIGKILL)
        return signum

    def gave_up(self, now):
        return self.kill_sent_at is not None and now - self.kill_sent_at > KILL_WAIT_S


class Job:
    """The workers of one job.

    Args:
      output: the ``Output`` that copies worker output and prints launcher messages.
      blame: the ``Blame`` that watches that output.
      grace_period_s: time between SIGTERM and SIGKILL.
      verbose: report every start, signal and exit.
      tracebacks: the ``Tracebacks`` that watches that output (optional): a rank the
        launcher had to stop after it printed its own uncaught error is reported with it.
      stopped_limit_s: how long a local worker may stay stopped before it counts as failed
        (None or 0: never).
    """

    def __init__(self, output, blame, grace_period_s, verbose=False, stopped_limit_s=None, tracebacks=None):
        self.output = output
        self.tracebacks = tracebacks
        self._signaled_at = {}  # rank -> monotonic time the launcher first signalled it
        self.stopped_limit_s = stopped_limit_s
        self._stopped_since = {}  # rank -> (monotonic time first seen stopped, signal)
        self._next_stopped_check = 0.0
        self.blame = blame
        self.grace = grace_period_s
        self.verbose = verbose
        self.workers = []
        self.first_failure = None  # the Failure blamed, once decided
        self.first_signal = None  # signal received by the launcher before any failure
        self._failures = []  # failures before the decision, in exit order
        self._exits = ExitQueue()
        self._stopper = _Stopper(grace_period_s)

    @property
    def stopping(self):
        return bool(self._failures) or self.first_signal is not None

    def start(self, slot, spawner, command, env):
        """Starts the worker of ``slot``. A command that cannot be started counts as that
        rank failing with code 127 (not found) or 126 (cannot execute)."""
        try:
            proc = spawner.spawn(command, env)
        except OSError as e:
            self.output.message(f"rank {slot.rank} could not start {command[0]!r}: {e.strerror or e}")
            self._add_failure(Failure(slot.rank, None, 127 if isinstance(e, FileNotFoundError) else 126))
            return
        worker = Worker(slot, proc, time.monotonic())
        self.workers.append(worker)
        self.output.attach(slot.rank, "stdout", proc.stdout)
        self.output.attach(slot.rank, "stderr", proc.stderr)
        self._exits.watch(worker, f"tfringrun-wait-rank{slot.rank}")
        if self.verbose:
            self.output.message(f"rank {slot.rank} started on {slot.host} (pid {proc.pid})")

    def _running(self):
        return [w for w in self.workers if w.returncode is None]

    def _add_failure(self, failure):
        if self.first_failure is not None or self.first_signal is not None:
            return  # decided already, or caused by the launcher's own signals
        self._failures.append(failure)
        if len(self._failures) == 1:
            self._stopper.schedule(time.monotonic(), signal.SIGTERM, delay=min(DRAIN_S, self.grace))

    def _decide(self):
        """Names the failure to blame, once, after the drain window or when none is left."""
        if self.first_failure is not None or not self._failures:
            return
        self.output.drain([f.rank for f in self._failures], OUTPUT_SETTLE_S)
        self._blame_stopped_workers()
        self.first_failure = self._with_host(self.blame.root_cause(self._failures))
        running = len(self._running())
        later = len(self._failures) - 1
        tail = f"; stopping the other {running} rank(s)" if running else ""
        if later:
            tail += f"; {later} other rank(s) failed too"
        self.output.message(f"{self.first_failure.describe()} first{tail}")

    def _stopped_failure(self, worker, now):
        """A Failure for ``worker`` if it is stopped now, else None."""
        if hasattr(worker.proc, "signal_group"):
            return None  # remote: its peers' heartbeats notice it
        signum = stop_signal(worker.pid)
        if signum is None:
            self._stopped_since.pop(worker.rank, None)
            return None
        since, _ = self._stopped_since.setdefault(worker.rank, (now, signum))
        return Failure(worker.rank, worker.pid, -signum, stopped_s=now - since)

    def _watch_stopped(self, now):
        """Fails a local worker that has been stopped for ``stopped_limit_s``."""
        if now < self._next_stopped_check or self.first_failure is not None:
            return
        self._next_stopped_check = now + STOPPED_CHECK_S
        failed = {f.rank for f in self._failures}
        for w in self._running():
            failure = None if w.rank in failed else self._stopped_failure(w, now)
            if failure is not None and self.stopped_limit_s and failure.stopped_s >= self.stopped_limit_s:
                self._add_failure(failure)

    def _blame_stopped_workers(self):
        """A worker still stopped whose loss a failed rank reported is the root cause: it
        goes first among the failures. So is a remote worker still running that a failed
        rank reported lost (its host frozen or cut off: this launcher cannot look at it)."""
        failed = {f.rank for f in self._failures}
        now = time.monotonic()
        for w in self._running():
            if w.rank in failed:
                continue
            reporters = [r for r in sorted(failed) if w.rank in self.blame.lost_by(r)]
            if not reporters:
                continue
            if hasattr(w.proc, "signal_group"):
                failure = Failure(w.rank, w.pid, 1, reported_by=reporters[0])
            else:
                failure = self._stopped_failure(w, now)
            if failure is not None:
                self._failures.insert(0, failure)

    def _with_host(self, failure):
        """``failure`` naming its host and that host's ranks when the worker is remote
        (a lost host takes every rank it runs)."""
        worker = next((w for w in self.workers if w.rank == failure.rank), None)
        if worker is None or not hasattr(worker.proc, "signal_group"):
            return failure
        ranks = sorted(w.rank for w in self.workers if w.slot.host == worker.slot.host)
        label = f"{worker.slot.host} (rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))})"
        return dataclasses.replace(failure, host=label)

    def on_signal(self, signum):
        """The launcher received ``signum``: forward it now; a repeat means SIGKILL now."""
        now = time.monotonic()
        if self._stopper.kill_scheduled or self.first_signal is not None:
            self.output.message(f"got {signal_name(signum)} again; killing every rank now")
            self._stopper.schedule(now, signal.SIGKILL)
            return
        self._decide()
        if self.first_failure is None:
            self.first_signal = signum
        self.output.message(f"got {signal_name(signum)}; passing it on to {len(self._running())} "
                            f"rank(s), SIGKILL in {self.grace:g} s")
        self._stopper.schedule(now, signum)

    def run(self, relay):
        """Supervises until every worker has exited (or will not die). Returns the exit code.

        ``relay`` is the ``SignalRelay`` whose signals are forwarded to the workers.
        """
        supervise(relay, self._exits, self)
        self._decide()
        self._reap_leftovers()
        if self.first_failure is not None:
            self._summary()
            return exit_status(self.first_failure.returncode) or 1
        if self.first_signal is not None:
            return 128 + self.first_signal
        return 0

    # ---- supervision_loop's events (on_signal above) ----------------------------------
    def over(self):
        return not self._running()

    def on_tick(self):
        """Stopped workers, the next scheduled signal; True when workers survived SIGKILL."""
        now = time.monotonic()
        self._watch_stopped(now)
        signum = self._stopper.due(now)
        if signum is not None:
            self._decide()
            self._signal_groups(self._running(), signum)
        if self._stopper.gave_up(now):
            pids = ", ".join(f"rank {w.rank} (pid {w.pid})" for w in self._running())
            self.output.message(f"{pids} still running {KILL_WAIT_S:g} s after SIGKILL; giving up")
            return True
        return False

    def on_exit(self, worker, returncode):
        worker.returncode = returncode
        if self.verbose:
            elapsed = time.monotonic() - worker.started
            self.output.message(f"rank {worker.rank} (pid {worker.pid}) {describe_exit(returncode)} "
                                f"after {elapsed:.2f} s")
        if returncode != 0:
            self._add_failure(Failure(worker.rank, worker.pid, returncode))

    def _signal_groups(self, workers, signum):
        if self.verbose and workers:
            self.output.message(f"sending {signal_name(signum)} to rank(s) "
                                + ", ".join(str(w.rank) for w in workers))
        now = time.monotonic()
        for w in workers:
            self._signaled_at.setdefault(w.rank, now)
            signal_and_resume(w, signum)

    def _reap_leftovers(self):
        """Stops whatever the workers left running in their process groups (SIGTERM, then
        SIGKILL after the grace period)."""
        # Remote workers' bootstraps reap their own leftovers (remote_boot.py).
        groups = [w.pid for w in self.workers
                  if not hasattr(w.proc, "signal_group") and killpg(w.pid, signal.SIGTERM)]
        if groups and self.verbose:
            self.output.message(f"sent SIGTERM to {len(groups)} process group(s) the workers left behind")
        deadline = time.monotonic() + self.grace
        while groups and time.monotonic() < deadline:
            time.sleep(REAP_POLL_S)
            groups = [g for g in groups if killpg(g, 0)]
        if groups:
            self.output.message(f"killing {len(groups)} process group(s) the workers left behind "
                                f"(pgid {', '.join(map(str, groups))})")
        for g in groups:
            killpg(g, signal.SIGKILL)

    def own_error(self, rank):
        """The uncaught error ``rank`` printed before the launcher first signalled it (any
        time, if it never did), or None."""
        if self.tracebacks is None:
            return None
        return self.tracebacks.last(rank, before=self._signaled_at.get(rank, float("inf")))

    def _summary(self):
        parts = []
        for w in sorted(self.workers, key=lambda w: w.rank):
            code = w.returncode
            text = "still running" if code is None else str(code) if code >= 0 else signal_name(-code)
            own = self.own_error(w.rank) if code is not None and code < 0 and w.rank in self._signaled_at else None
            if own is not None:  # it had failed on its own; the signal only cut its exit short
                text = f"failed with {own} (then stopped by {text})"
            parts.append(f"{w.rank}: {text}")
        if parts:
            self.output.message("exit codes by rank: " + ", ".join(parts))
