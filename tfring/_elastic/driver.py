"""The elastic driver: runs a job whose membership changes while it trains
(``tfringrun --min-np N --max-np M [--host-discovery-script S] ...``).

Policy:
- Start as many workers as the hosts allow (``-np`` if given, at most ``--max-np``). A
  started worker joins a generation only once it is *ready* (it called ``init()``), so one
  that crashes while starting never holds up the others. Generation 1 forms once every
  first worker is ready (or gone) and at least ``--min-np`` are.
- A worker that exits non-zero or is killed (or stays stopped for TFRING_PEER_TIMEOUT_S,
  then is killed) is *lost*: its host is blacklisted (for good, or for a cooldown with
  ``--blacklist-cooldown-range``); its peers notice within milliseconds, restore their
  last commit and wait for the next generation.
- The next generation: the surviving workers keep their order (the lowest surviving rank
  becomes rank 0, so rank 0 always holds the committed state) and new workers on free,
  non-blacklisted slots follow, up to ``--max-np``. Published in the store (protocol.py),
  then the new workers start. Running workers learn of a generation that adds workers at
  their next commit (``HostsUpdatedInterrupt``).
- A host the discovery script stops listing: its workers leave at the job's next commit
  (the others re-form without them, nothing is lost); SIGTERM if they have not left
  TFRING_START_TIMEOUT_S later. One that dies before it has left (it never wrote
  ``protocol.left_key``, and the driver sent it no signal) is lost as above, named and its
  host blacklisted, whether the script stopped listing the host before or after the driver
  saw the exit (a killed host is often unlisted by then): what the job reports must not
  depend on that race, and a host that killed a worker is suspect when it is listed again.
- The script fails before ``init()``: no generation has formed yet, and every worker
  started so far has exited with the same code from 1 to 127 (an exit, not a signal,
  not ssh's 255) without having called ``init()`` (an import error, a typo, a bad
  argument). No host can help: end the job at once with that code, showing the last lines
  of a failed worker's output (its traceback). A worker that fails while another one is
  still starting or ready, or after a generation formed, is lost as above.
- Fewer than ``--min-np`` possible workers: wait up to ``--elastic-timeout`` for hosts; then
  end the job (the reason goes to the workers through the store and to the console), exit 1.
  More than ``--reset-limit`` re-formations end the job the same way.
- A member that finds the running generation broken (a lost peer, a failed rendezvous)
  reports it through the store; the driver then re-forms the job with the same live
  workers even if no process exited (a frozen remote peer, a network cut).
- Once a worker exits 0 the job is finishing: no more generations, waiting workers are
  told so; the job exits 0 when every worker has, else with the first later failure's
  code (the others are stopped then). A *late joiner* (a worker that never joined a
  generation: still starting, waiting, or in the rendezvous of a generation the finished
  worker never joined) has nothing to do: it exits 0 by itself once it reads that the job
  finished, or is stopped ``END_NOTICE_S`` later (a rendezvous does not read the store);
  either way its exit does not count.
- Every SIGTERM the driver sends is followed by SIGKILL after the grace period.
- SIGINT/SIGTERM/SIGHUP go to every worker (SIGKILL after the grace period); exit 128+N.

Every wait is bounded. The job's phases are phases.py's; when discovery runs and
what holds a change back from becoming the next generation (a broken generation settling,
below ``--min-np``, a growth waiting for the current generation), with their deadlines, are
timers.py's: the driver asks them. Main thread only, in the launcher's supervision loop
(tfring/_runner/supervision_loop.py, the static job's too); one waiter thread per worker
reports its exit.
"""

import collections
import dataclasses
import signal
import threading
import time

from tfring._elastic import protocol
from tfring._elastic.phases import Phase, check_move
from tfring._elastic.timers import ReformationTimers
from tfring._runner.discovery import FixedDiscovery
from tfring._runner.hosts import slots_of
from tfring._runner.signals import signal_name
from tfring._runner.stopped import stop_signal
from tfring._runner.supervision_loop import ExitQueue, supervise
from tfring._runner.supervisor import describe_exit, exit_status, killpg, signal_and_resume

END_NOTICE_S = 1.0  # between telling the workers why the job ends and SIGTERM
STOPPED_CHECK_S = 0.25
KILL_WAIT_S = 5.0
TAIL_LINES = 40  # lines of each worker's output kept for the report of a script failing before init()
REPORT_LINES = 20  # at most this many of them are shown
NAMED_WORKERS = 8  # a message names at most this many workers
DRAIN_FAILED_S = 2.0  # for the output of workers that failed before init(), before it is shown


class OutputTails:
    """The last ``TAIL_LINES`` lines of each worker's output (both streams, in arrival
    order): ``Output(observer=tails.observe)``. Thread-safe (called by the reader threads)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._lines = {}

    def observe(self, wid, text):
        with self._lock:
            self._lines.setdefault(wid, collections.deque(maxlen=TAIL_LINES)).append(text.rstrip("\r\n"))

    def last_lines(self, wid):
        """The worker's last lines worth showing: from its last ``Traceback`` line on when
        one is kept, else the last ones; at most ``REPORT_LINES``."""
        with self._lock:
            lines = list(self._lines.get(wid, ()))
        starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
        if starts:
            lines = lines[starts[-1]:]
        return lines[-REPORT_LINES:]


@dataclasses.dataclass
class ElasticWorker:
    wid: str
    host: str
    proc: object
    started: float
    generation: int = 0  # the latest generation it belongs to
    rank: int = None  # its rank there
    returncode: int = None
    removed: bool = False  # left out of the newest generation: stopped by the driver
    unlisted: bool = False  # removed because its host is no longer listed: it is to leave by itself
    leave_by: float = None  # removed but still in the running generation: SIGTERM at this time
    kill_at: float = None  # sent SIGTERM: SIGKILL at this time if it is still running
    killed_at: float = None  # when it was sent SIGKILL
    ready: bool = False  # it waits for a generation (protocol.ready_key)
    late: bool = False  # never joined a generation when the job finished: leaves quietly

    @property
    def pid(self):
        return self.proc.pid

    def describe(self, size_of):
        where = (f"rank {self.rank} of {size_of(self.generation)} in generation {self.generation}"
                 if self.rank is not None else "not yet in a generation")
        return f"worker {self.wid} ({where}, host {self.host}, pid {self.pid})"


@dataclasses.dataclass
class ElasticSettings:
    min_np: int
    max_np: int  # None: no limit
    initial_np: int  # None: as many as the hosts allow
    reset_limit: int  # None: no limit
    elastic_timeout_s: float
    discovery_interval_s: float
    grace_period_s: float
    stopped_limit_s: float  # a worker stopped this long is killed (None/0: never)
    ready_timeout_s: float  # a started worker not ready by then is killed


class GenerationStore:
    """The driver's side of protocol.py: every key it reads or writes in the job's store
    (``store``, a ``_core.StoreClient``), and nothing else: no policy, no processes. Main
    thread only, like the job."""

    def __init__(self, store):
        self.client = store

    def ready(self, wid):
        """The worker called ``init()`` and waits for a generation."""
        return bool(self.client.add(protocol.ready_key(wid), 0))

    def left(self, wid):
        """The worker found itself left out of the newest generation and left."""
        return bool(self.client.add(protocol.left_key(wid), 0))

    def joins(self, wid):
        """How many generations the worker has joined (its rendezvous succeeded)."""
        return self.client.add(protocol.joined_key(wid), 0)

    def joined(self, wid):
        """The worker has joined a generation."""
        return self.joins(wid) > 0

    def broken(self, generation):
        """A member reported ``generation`` broken."""
        return bool(self.client.add(protocol.broken_key(generation), 0))

    def broken_by(self, generation, wid):
        """The worker itself reported ``generation`` broken."""
        return bool(self.client.add(protocol.broken_by_key(generation, wid), 0))

    def lost(self, generation, rank):
        """Rank 0 of ``generation`` reported ``rank`` lost."""
        return bool(self.client.add(protocol.lost_key(generation, rank), 0))

    def publish(self, generation, assignments):
        """Writes each ``(wid, slot)`` assignment of ``generation``, then raises the current
        generation to it. Raises RuntimeError when the store's counter disagrees (another
        driver on the same store)."""
        for wid, slot in assignments:
            self.client.set(protocol.assignment_key(generation, wid),
                            protocol.Assignment(generation, slot).encode())
        published = self.client.add(protocol.CURRENT, 1)
        if published != generation:
            raise RuntimeError(f"the elastic store's generation is {published}, expected {generation}: is "
                               "another driver using this store?")

    def end(self, reason, finished=False):
        """Tells every worker that the job ended and why (``finished``: it succeeded)."""
        if finished:
            self.client.add(protocol.FINISHED, 1)
        self.client.set(protocol.END_REASON, reason.encode())
        self.client.add(protocol.ENDED, 1)


class Membership:
    """The job's workers and generations: which workers are live, which may be in the next
    generation and in what order, the size of each generation, the free slots. Reads no
    store and starts or signals no process. Main thread only, like the job."""

    def __init__(self):
        self.workers = []  # every ElasticWorker started, in start order
        self.generation = 0  # the latest published generation (0: none yet)
        self.sizes = {}  # generation -> size
        self._next_wid = 0

    def size_of(self, generation):
        return self.sizes.get(generation, "?")

    def new_wid(self):
        wid = f"w{self._next_wid}"
        self._next_wid += 1
        return wid

    def live(self):
        return [w for w in self.workers if w.returncode is None and not w.removed]

    def members(self):
        """Live workers that can be in the next generation, current members first (in rank
        order, so the lowest surviving rank becomes rank 0), then the newly ready ones."""
        # Not one that was sent SIGKILL (stopped too long) and has not been reaped yet.
        ready = [w for w in self.live() if w.ready and not _frozen(w) and w.killed_at is None]
        return sorted(ready, key=lambda w: (w.rank is None, w.rank if w.rank is not None else int(w.wid[1:])))

    def current(self):
        """The members of the latest generation."""
        return [w for w in self.workers if w.generation == self.generation and w.rank is not None]

    def pending(self):
        return [w for w in self.live() if not w.ready]

    def running(self):
        return [w for w in self.workers if w.returncode is None]

    def free_slots(self, hosts, blacklist, now):
        """``[host, ...]``, one entry per free slot on a usable host of ``hosts``, in their order."""
        used = {}
        for w in self.live():
            used[w.host] = used.get(w.host, 0) + 1
        free = []
        for h in hosts:
            if not blacklist.blocked(h.name, now):
                free += [h.name] * max(0, h.slots - used.get(h.name, 0))
        return free

    def record(self, generation, members):
        """``generation`` was published with ``members``, ranked in their order."""
        self.generation = generation
        self.sizes[generation] = len(members)
        for rank, w in enumerate(members):
            w.generation, w.rank = generation, rank


class ElasticJob:
    """The workers of one elastic job: the driver's policy and its process supervision
    (start, exits, signals, stops). What the workers and generations are is its
    ``membership`` (Membership); what it reads and writes in the store goes through
    ``keys`` (GenerationStore).

    Args:
      output: ``Output`` copying worker output (labelled by worker id) and printing messages.
      store: a ``_core.StoreClient`` of the job's store.
      discovery: ``discovery.FixedDiscovery`` or ``ScriptDiscovery``.
      blacklist: ``discovery.Blacklist``.
      start_worker: ``f(wid, host) -> Popen-like`` (raises OSError when it cannot start).
      settings: ``ElasticSettings``.
      verbose: report every start and exit.
      tails: the ``OutputTails`` observing ``output`` (shown when the script fails before
        ``init()``); None: none are shown.
      clock: ``() -> seconds``, monotonic: every time the driver reads, its re-formation
        timers' (timers.py) included.
    """

    def __init__(self, output, store, discovery, blacklist, start_worker, settings, verbose=False, tails=None,
                 clock=time.monotonic):
        self.output = output
        self.tails = tails
        self.store = store  # the client, for GenerationStore and tests
        self.keys = GenerationStore(store)  # the protocol's keys: the store's only reader and writer here
        self.membership = Membership()
        self.discovery = discovery
        self.blacklist = blacklist
        self._start_worker = start_worker
        self.cfg = settings
        self.verbose = verbose
        self._exits = ExitQueue()
        self._hosts = []  # the latest discovered [Host]
        self._change = "start"  # why a new generation is needed (None: none is)
        self._clock = clock
        # When to discover, and what holds a change back (broken settle, --min-np, growth)
        self.timers = ReformationTimers(settings.elastic_timeout_s, settings.discovery_interval_s,
                                        settings.ready_timeout_s, clock)
        self.phase = Phase.STARTING  # the job's state machine: phases.py
        self.end_reason = None  # ENDING: why
        self.first_signal = None  # SIGNALLED: the signal
        self.failure_after_finish = None  # FAILING_AFTER_FINISH: the worker that failed
        self.end_code = 1  # ENDING: the exit code
        self._stop_at = None  # _end: SIGTERM to every worker at this time
        self._force = False  # re-form even with the same members (a worker found the generation broken)
        self._stopped_since = {}
        self._next_stopped_check = 0.0
        self._joins_at_publish = {}  # wid -> its joined count when the current generation was published

    # ---- phases (phases.py) ---------------------------------------------------
    @property
    def finishing(self):
        """A worker finished training: no more generations (FINISHING, FAILING_AFTER_FINISH)."""
        return self.phase.finishing

    def _move(self, phase):
        self.phase = check_move(self.phase, phase)

    def _describe(self, worker):
        return worker.describe(self.membership.size_of)

    # ---- events (supervision_loop's) ---------------------------------------------------
    def on_exit(self, worker, code):
        worker.returncode = code
        if self.verbose:
            self.output.message(f"{self._describe(worker)} {describe_exit(code)} "
                                f"after {self._clock() - worker.started:.2f} s")
        if self.phase.ending:
            return
        if worker.removed:
            if self._died_leaving(worker, code):
                self._lost(worker, f"{describe_exit(code)} before leaving the job (its host is no longer listed)")
            return
        if code == 0:
            if not self.finishing:
                self._move(Phase.FINISHING)
                self.output.message(f"{self._describe(worker)} finished; no more re-formations, "
                                    "waiting for the other workers to finish")
                self._tell_workers(f"{worker.wid} finished training; the job re-forms no more", finished=True)
                self._dismiss_late_joiners()
            return
        if worker.rank is None:  # never in a generation: the job goes on without it
            worker.ready = worker.ready or self.keys.ready(worker.wid)
            if not worker.ready and self._script_fails():
                return
            self._lost(worker, describe_exit(code) + ("" if worker.ready else " before calling init()"))
            return
        if self.finishing:
            if self.failure_after_finish is None:
                self._move(Phase.FAILING_AFTER_FINISH)
                self.failure_after_finish = worker
                self.output.message(f"{self._describe(worker)} {describe_exit(code)} after another "
                                    "worker had finished; stopping the others")
                self._stop_all(signal.SIGTERM)
            return
        self._lost(worker, describe_exit(code))

    def _died_leaving(self, worker, code):
        """True when ``worker``, removed because its host is no longer listed, exited
        without leaving: not with code 0, not after a signal from this driver, and without
        having written ``protocol.left_key`` (what a worker writes when it finds itself left
        out of a generation and leaves). A late joiner's exit never counts."""
        if not worker.unlisted or worker.late or code == 0 or worker.kill_at is not None:
            return False
        return not self.keys.left(worker.wid)

    def _lost(self, worker, how):
        wait = self.blacklist.record_failure(worker.host, self._clock())
        out = "for the rest of the job" if wait == float("inf") else f"for {wait:g} s"
        self.output.message(f"lost {self._describe(worker)}: it {how}; host {worker.host} "
                            f"blacklisted {out}")
        if worker.rank is not None:  # a worker not yet in a generation holds up no one
            self._change = f"lost rank {worker.rank} on host {worker.host}"

    def _script_fails(self):
        """Ends the job (True) when the script fails before ``init()`` on every worker:
        no generation has formed, and every worker started so far has exited with one same
        code from 1 to 127 without having called ``init()`` (module docstring). ``ready``
        is up to date for every exited worker (``on_exit`` reads the store)."""
        codes = {w.returncode for w in self.membership.workers}
        if self.membership.generation or len(codes) != 1 or any(w.ready for w in self.membership.workers):
            return False
        code = codes.pop()
        if code is None or not 0 < code < 128:
            return False
        failed = ", ".join(f"{w.wid} on {w.host}" for w in self.membership.workers[:NAMED_WORKERS])
        if len(self.membership.workers) > NAMED_WORKERS:
            failed += f" and {len(self.membership.workers) - NAMED_WORKERS} more"
        self.end_code = code
        self._end(f"every worker started so far ({failed}) exited with code {code} before calling init(), "
                  "and no generation has formed: the script fails before init(), which no other host can "
                  "change, so the job does not wait for hosts (--elastic-timeout)")
        self._show_last_lines(self.membership.workers)
        return True

    def _show_last_lines(self, failed):
        """The last lines of the first failed worker's output (its traceback), and the last
        line of each other one that ended differently."""
        if self.tails is None:
            return
        self.output.drain([w.wid for w in failed], DRAIN_FAILED_S)
        first = self.tails.last_lines(failed[0].wid)
        if not first:
            self.output.message(f"worker {failed[0].wid} printed nothing")
            return
        self.output.message(f"the last lines of worker {failed[0].wid}'s output:")
        for line in first:
            self.output.message(f"  {line}")
        for w in failed[1:]:
            last = self.tails.last_lines(w.wid)[-1:]
            if last != first[-1:]:
                self.output.message(f"worker {w.wid} ended with: {last[0] if last else '(no output)'}")

    def _dismiss_late_joiners(self):
        """Once the job finishes, a worker that never joined a generation has nothing to
        join: still starting, waiting for a generation, or in the rendezvous of one that the
        finished worker never joined (so it can never complete). It has read that the job
        finished (``_tell_workers``) and leaves with exit code 0 by itself; one that has
        not left ``END_NOTICE_S`` later (it was importing, or blocked in the rendezvous)
        gets SIGTERM. Its exit does not count either way."""
        now = self._clock()
        for w in self.membership.live():
            if w.rank is None or not self.keys.joined(w.wid):
                w.removed, w.late, w.leave_by = True, True, now + END_NOTICE_S
                self.output.message(f"{self._describe(w)} had not joined the job when it finished; it "
                                    "leaves without training")

    def _watch_stopped(self, now):
        """Kills a local worker stopped for ``stopped_limit_s`` (frozen: its peers lose it,
        and it would hold up the next generation's rendezvous)."""
        if not self.cfg.stopped_limit_s or now < self._next_stopped_check:
            return
        self._next_stopped_check = now + STOPPED_CHECK_S
        for w in self.membership.live():
            if hasattr(w.proc, "signal_group"):
                continue  # remote: its peers' heartbeats notice it
            signum = stop_signal(w.pid)
            if signum is None:
                self._stopped_since.pop(w.wid, None)
                continue
            since = self._stopped_since.setdefault(w.wid, now)
            if now - since >= self.cfg.stopped_limit_s:
                self.output.message(f"{self._describe(w)} has been stopped by {signal_name(signum)} "
                                    f"for {now - since:.1f} s; killing it")
                signal_and_resume(w, signal.SIGKILL)
                w.killed_at = now
                self._stopped_since.pop(w.wid, None)

    def _discover(self):
        if not self.timers.discovery_due():
            return
        self._hosts = self.discovery.hosts()
        listed = {h.name for h in self._hosts}
        for w in self.membership.live():
            if w.host not in listed:
                self._remove(w)
        for w in self.membership.workers:  # listed again before anything was done about it: it stays
            if w.removed and w.returncode is None and w.leave_by is None and w.kill_at is None \
                    and w.rank is not None and w.host in listed:
                w.removed = w.unlisted = False
                self.output.message(f"host {w.host} is listed again; {self._describe(w)} stays")

    def _remove(self, w):
        """Leaves ``w`` (whose host is no longer listed) out of the next generation. A member
        of the running generation leaves gracefully: the others re-form at their next commit
        (``HostsUpdatedInterrupt``), nothing is lost, and ``w`` learns at its reset that it is
        out; it gets SIGTERM only if it is still running ``ready_timeout_s`` later (one that
        dies before it has left is lost: ``_died_leaving``)."""
        w.removed = w.unlisted = True
        where = f"host {w.host} is no longer listed by the {self.discovery.describe()}"
        if w.rank is None:
            self.output.message(f"{where}; stopping {self._describe(w)}")
            self._terminate(w)
            return
        self.output.message(f"{where}; {self._describe(w)} leaves at the job's next commit once a "
                            "generation without it is published")
        self._change = f"host {w.host} removed"

    def _stop_leavers(self, now):
        """SIGTERM to removed workers that have not left by their time; SIGKILL to any
        worker still running ``grace_period_s`` after its SIGTERM."""
        for w in self.membership.workers:
            if w.returncode is not None:
                continue
            if w.leave_by is not None and now >= w.leave_by:
                w.leave_by = None
                if w.late and w.rank is not None and self.keys.joined(w.wid):
                    w.removed = w.late = False  # it joined after all (before its peer finished): a member
                    continue
                if not w.late or self.verbose:
                    self.output.message(f"{self._describe(w)} has not left; stopping it")
                self._terminate(w)
            elif w.kill_at is not None and now >= w.kill_at:
                w.kill_at = float("inf")
                if self.verbose or not self.phase.ending:
                    self.output.message(f"{self._describe(w)} is still running {self.cfg.grace_period_s:g} s "
                                        "after SIGTERM; killing it")
                signal_and_resume(w, signal.SIGKILL)
                w.killed_at = now

    def _terminate(self, w):
        signal_and_resume(w, signal.SIGTERM)
        w.kill_at = self._clock() + self.cfg.grace_period_s

    def _check_broken(self):
        """A member that found the running generation broken (it lost a peer, or the
        rendezvous failed) asks for a new one, whether or not a process exited."""
        if self.membership.generation and not self.finishing and self._change is None \
                and self.keys.broken(self.membership.generation):
            self._change = f"a worker found generation {self.membership.generation} broken"
            self._force = True
            # Let an exit that caused it arrive first, so the next generation leaves the
            # dead worker out instead of waiting for it in a rendezvous.
            self.timers.broken_reported()

    def _leave_out_lost(self):
        """Members of the broken generation that its rank 0 reported lost, and the members
        on the same host that did not report the generation broken themselves, whose
        processes have not exited (the host frozen or cut off from rank 0 and the store:
        this driver may still reach it, through ssh or here), are lost too: their host is
        blacklisted, they are left out of the next generation (which they could only hold
        up until its rendezvous times out) and stopped if still running ``ready_timeout_s``
        after it is published. On a partition the side of rank 0 (and of the store) goes on."""
        g = self.membership.generation
        # Local workers are looked at directly: a stopped one is left out (_members) and
        # killed after the stopped limit (_watch_stopped); only remote ones are judged here.
        members = [w for w in self.membership.live() if w.generation == g and w.rank not in (None, 0)
                   and hasattr(w.proc, "signal_group")]
        lost = [w for w in members if self.keys.lost(g, w.rank)]
        hosts = {w.host: w.rank for w in lost}
        silent = [w for w in members if w not in lost and w.host in hosts
                  and not self.keys.broken_by(g, w.wid)]
        for w in lost + silent:
            w.removed = True
            why = (f"was reported lost by rank 0 of generation {g}" if w in lost else
                   f"is on host {w.host} with rank {hosts[w.host]}, which rank 0 of generation {g} lost, and did "
                   "not report the generation broken")
            self._lost(w, f"{why} (silent: its host frozen or cut off, or its network drops packets)")

    def _check_ready(self, now):
        """Marks started workers that became ready; kills one not ready in time."""
        for w in self.membership.pending():
            if self.keys.ready(w.wid):
                w.ready = True
                self._change = self._change or f"worker {w.wid} on host {w.host} is ready"
            elif now - w.started > self.cfg.ready_timeout_s:
                self.output.message(f"{self._describe(w)} did not call init() within "
                                    f"{self.cfg.ready_timeout_s:g} s (TFRING_START_TIMEOUT_S); killing it")
                signal_and_resume(w, signal.SIGKILL)
                w.started = float("inf")  # reported once; its exit counts as a loss

    def _grow(self, now):
        """Starts workers on free slots, up to ``--max-np`` (``-np`` for the first ones)."""
        if not self.phase.forms_generations:
            return
        limit = self.cfg.max_np if self.cfg.max_np is not None else float("inf")
        if self.membership.generation == 0 and self.cfg.initial_np is not None:
            limit = min(limit, self.cfg.initial_np)
        free = self.membership.free_slots(self._hosts, self.blacklist, now)
        live = len(self.membership.live())
        for host in free[: max(0, int(min(limit, live + len(free))) - live)]:
            self._spawn(self.membership.new_wid(), host)

    # ---- generations ------------------------------------------------------------------
    def _form_generation(self):
        """Publishes the next generation when a change is pending and nothing holds it back:
        the timers (timers.py) answer for the waits, the members and
        ``--reset-limit`` are checked here."""
        if self._change is None or not self.phase.forms_generations or not self.timers.may_form():
            return
        if self.membership.generation == 0 and self.membership.pending():
            return  # the first generation waits for every first worker (bounded by ready_timeout_s)
        if self._force:
            self._leave_out_lost()
        members = self.membership.members()
        if len(members) < self.cfg.min_np:
            self._below_min_np(len(members))
            return
        self.timers.enough_workers()
        g = self.membership.generation
        if (not self._force and g > 0 and all(w.generation == g for w in members)
                and len(members) == self.membership.sizes.get(g)):
            self._change = None  # the same membership: nothing to re-form
            self.timers.no_growth_hold()
            return
        if self._hold_growth(members):
            return
        if self.cfg.reset_limit is not None and self.membership.generation > self.cfg.reset_limit:
            self._end(f"the job re-formed {self.membership.generation - 1} time(s) and may not again "
                      f"(--reset-limit {self.cfg.reset_limit})")
            return
        self._publish(members, self._change)

    def _hold_growth(self, members):
        """True while a change that only adds workers should wait (every member of the
        current generation is still in ``members``, none reported it broken):
        - until the current generation has formed (each member's rendezvous succeeded):
          a generation published over one still forming would leave its new members waiting
          in a rendezvous that the running workers skip, holding up the next one for
          TFRING_START_TIMEOUT_S; bounded by the ready timeout;
        - for ``GROW_SETTLE_S`` while other started workers are not ready yet (the slots of
          a host that came back start together): one re-formation takes them all.
        The timers keep the time (HOLDING_GROWTH); this says what holds."""
        current = self.membership.current()
        if self._force or self.membership.generation == 0 \
                or not set(map(id, current)) <= set(map(id, members)):
            self.timers.no_growth_hold()
            return False
        formed = all(self.keys.joins(w.wid) > self._joins_at_publish.get(w.wid, 0)
                     for w in current)
        return self.timers.hold_growth(formed, starting=bool(self.membership.pending()))

    def _below_min_np(self, ready):
        if self.timers.below_min_np():
            self.output.message(f"{ready} worker(s) ready, below --min-np {self.cfg.min_np}; waiting up to "
                                f"{self.cfg.elastic_timeout_s:g} s (--elastic-timeout) for more")
        free = self.membership.free_slots(self._hosts, self.blacklist, self._clock())
        possible = len(self.membership.live()) + len(free)
        if possible < self.cfg.min_np and self.blacklist.permanent() and isinstance(self.discovery, FixedDiscovery):
            self._end(f"{possible} worker(s) can ever run on the hosts left ({self.discovery.describe()}, the others "
                      f"blacklisted), fewer than --min-np {self.cfg.min_np}")
        elif self.timers.min_np_timed_out():
            self._end(f"only {ready} worker(s) could run for {self.cfg.elastic_timeout_s:g} s "
                      f"(--elastic-timeout), below --min-np {self.cfg.min_np}")

    def _publish(self, members, reason):
        """Writes generation g's assignments, then raises the current generation to g."""
        g = self.membership.generation + 1
        self.keys.publish(g, [(w.wid, slot) for w, slot in zip(members, slots_of([w.host for w in members]))])
        now = self._clock()
        # Removed members leave at the next commit; SIGTERM if they have not.
        for w in self.membership.workers:
            if w.removed and w.returncode is None and w.rank is not None and w.leave_by is None \
                    and w.kill_at is None:
                w.leave_by = now + self.cfg.ready_timeout_s
        self._move(Phase.RUNNING)
        self.membership.record(g, members)
        self._joins_at_publish = {w.wid: self.keys.joins(w.wid) for w in members}
        self._change = None
        self._force = False
        plan = ", ".join(f"{w.rank}={w.wid}@{w.host}" for w in members)
        self.output.message(f"generation {g}: {len(members)} worker(s) ({reason}); ranks {plan}")

    def _spawn(self, wid, host):
        try:
            proc = self._start_worker(wid, host)
        except OSError as e:
            self.output.message(f"worker {wid} could not be started on {host}: {e.strerror or e}")
            self.blacklist.record_failure(host, self._clock())
            self._change = f"worker {wid} could not start on {host}"
            return
        w = ElasticWorker(wid, host, proc, self._clock())
        self.membership.workers.append(w)
        self.output.attach(wid, "stdout", proc.stdout)
        self.output.attach(wid, "stderr", proc.stderr)
        self._exits.watch(w, f"tfringrun-wait-{wid}")
        if self.verbose:
            self.output.message(f"{self._describe(w)} started")

    def _end(self, reason):
        """Ends the job: tells the workers why (through the store), then stops them after
        ``END_NOTICE_S`` (waiting workers read the reason and exit by themselves)."""
        self._move(Phase.ENDING)
        self.end_reason = reason
        self.output.message(f"ending the elastic job: {reason}")
        self._tell_workers(reason)
        self._stop_at = self._clock() + END_NOTICE_S

    def _tell_workers(self, reason, finished=False):
        """Workers waiting for a generation raise JobEndedError with ``reason``; with
        ``finished`` (the job succeeded), those that never joined one exit 0 instead."""
        try:
            self.keys.end(reason, finished)
        except Exception as e:  # noqa: BLE001 - the store is ours; report and go on
            self.output.message(f"could not tell the workers through the store: {e}")

    def _stop_all(self, signum):
        """``signum`` to every running worker; SIGKILL follows after the grace period."""
        deadline = self._clock() + self.cfg.grace_period_s
        for w in self.membership.running():
            signal_and_resume(w, signum)
            w.kill_at = min(w.kill_at or deadline, deadline)

    # ---- main loop ----------------------------------------------------------------------
    def run(self, relay):
        """Supervises until the job ends. Returns the launcher's exit code."""
        supervise(relay, self._exits, self)
        self._reap_leftovers()
        if self.phase is Phase.ENDING:
            return self.end_code
        if self.phase is Phase.SIGNALLED:
            return 128 + self.first_signal
        if self.phase is Phase.FAILING_AFTER_FINISH:
            return exit_status(self.failure_after_finish.returncode) or 1
        return 0

    def over(self):
        return not self.membership.running() and (self.phase.ending or self.finishing)

    def on_tick(self):
        """Leavers, the end's SIGTERM, and while not ending the policy's checks and the next
        generation; True when a worker survived SIGKILL."""
        now = self._clock()
        self._stop_leavers(now)
        if self._gave_up(now):
            return True
        if self.phase.ending:
            if self._stop_at is not None and now >= self._stop_at:
                self._stop_at = None
                self._stop_all(signal.SIGTERM)
            return False
        self._watch_stopped(now)
        self._check_ready(now)
        self._check_broken()
        self._discover()
        self._grow(now)
        self._form_generation()
        return False

    def _gave_up(self, now):
        """True (and says so) when a worker survived SIGKILL for ``KILL_WAIT_S``."""
        stuck = [w for w in self.membership.running()
                 if w.killed_at is not None and now - w.killed_at > KILL_WAIT_S]
        if stuck:
            self.output.message(", ".join(w.wid for w in stuck) + f" still running {KILL_WAIT_S:g} s after SIGKILL; "
                                "giving up")
        return bool(stuck)

    def on_signal(self, signum):
        if self.phase.ending:
            self.output.message(f"got {signal_name(signum)} again; killing every worker now")
            for w in self.membership.running():
                signal_and_resume(w, signal.SIGKILL)
                w.killed_at = w.killed_at or self._clock()
            return
        self._move(Phase.SIGNALLED)
        self.first_signal = signum
        running = len(self.membership.running())
        self.output.message(f"got {signal_name(signum)}; passing it on to {running} worker(s), "
                            f"SIGKILL in {self.cfg.grace_period_s:g} s")
        self._stop_all(signum)

    def _reap_leftovers(self):
        for w in self.membership.workers:
            if not hasattr(w.proc, "signal_group"):
                killpg(w.pid, signal.SIGKILL)


def _frozen(worker):
    """A local worker stopped by a signal right now (it would hold up a rendezvous)."""
    return not hasattr(worker.proc, "signal_group") and stop_signal(worker.pid) is not None


