"""The re-formation timers of an elastic job (``ElasticJob`` in driver.py): when the
driver next runs host discovery, and what holds a pending change back from becoming the next
generation, with its deadline. One wait at a time, its moves checked like the job's phases
(phases.py): ``check_wait_move`` refuses a move the table does not list.

    NONE ──a member reports the generation broken──► SETTLING ──BROKEN_SETTLE_S later──► NONE
    NONE ──fewer than --min-np ready members───────► BELOW_MIN_NP ──enough are ready──► NONE
                                                       (the driver ends the job after --elastic-timeout)
    NONE ──a change that only adds workers─────────► HOLDING_GROWTH ──released────────► NONE
                                      HOLDING_GROWTH ──a member lost meanwhile──► BELOW_MIN_NP

  NONE            nothing holds a change back: the driver publishes it at once (if it
                  changes the membership and --reset-limit allows)
  SETTLING        a member found the running generation broken with no exit seen: the
                  driver waits BROKEN_SETTLE_S so that an exit that caused it arrives first
                  (the next generation then leaves the dead worker out)
  BELOW_MIN_NP    fewer than --min-np workers are ready: the driver waits up to
                  --elastic-timeout for more, then ends the job
  HOLDING_GROWTH  a change that only adds workers (every current member stays, none reported
                  the generation broken) waits until the current generation has formed
                  (every member's rendezvous succeeded; at most the ready timeout,
                  TFRING_START_TIMEOUT_S) and then up to GROW_SETTLE_S while other started
                  workers are not ready yet (a host's slots start together): one generation
                  takes them all

Discovery has no state: it runs every --discovery-interval-s (``discovery_due``).

Not here: each worker's own deadlines (ready timeout, leave-by, SIGTERM -> SIGKILL, kill
wait) are stopping deadlines, kept on ``ElasticWorker``; a blacklisted host's cooldown is
``discovery.Blacklist``'s; the notice before the job's workers are stopped is the ENDING
phase's. Every question reads the injected clock (``time.monotonic`` in the driver; a fake
one in tests/test_elastic_timers.py). Main thread only, like the job.
"""

import enum
import time

BROKEN_SETTLE_S = 0.5  # after a worker reports its generation broken, before re-forming
GROW_SETTLE_S = 1.0  # a worker became ready: how long to wait for others starting beside it


class Wait(enum.Enum):
    NONE = "none"
    SETTLING = "settling"
    BELOW_MIN_NP = "below min-np"
    HOLDING_GROWTH = "holding growth"


WAIT_MOVES = {
    Wait.NONE: {Wait.SETTLING, Wait.BELOW_MIN_NP, Wait.HOLDING_GROWTH},
    Wait.SETTLING: {Wait.NONE},
    Wait.BELOW_MIN_NP: {Wait.NONE},
    Wait.HOLDING_GROWTH: {Wait.NONE, Wait.BELOW_MIN_NP},
}


class WaitError(RuntimeError):
    """A move the table does not list: a bug in the driver, never a user's error."""


def check_wait_move(current, new):
    """Returns ``new`` when the timers may move from ``current`` to it; raises ``WaitError``."""
    if new not in WAIT_MOVES[current]:
        allowed = ", ".join(sorted(w.name for w in WAIT_MOVES[current]))
        raise WaitError(f"elastic job's re-formation timers: no move from {current.name} to {new.name} "
                        f"(allowed: {allowed}); see tfring/_elastic/timers.py")
    return new


class ReformationTimers:
    """The deadlines that decide when the driver discovers hosts and when a pending change
    may become the next generation (module docstring).

    Args:
      elastic_timeout_s: how long to wait below ``--min-np`` before the job ends.
      discovery_interval_s: between two runs of host discovery.
      ready_timeout_s: bounds the wait of a growth for the current generation to form.
      clock: ``() -> seconds``, monotonic.
    """

    def __init__(self, elastic_timeout_s, discovery_interval_s, ready_timeout_s, clock=time.monotonic):
        self.elastic_timeout_s = elastic_timeout_s
        self.discovery_interval_s = discovery_interval_s
        self.ready_timeout_s = ready_timeout_s
        self.clock = clock
        self.wait = Wait.NONE
        self._since = None  # BELOW_MIN_NP, HOLDING_GROWTH: when the wait began
        self._until = None  # SETTLING: when it ends
        self._next_discovery = 0.0  # the first call is due

    def _move(self, wait, now=None):
        self.wait = check_wait_move(self.wait, wait)
        self._since = now
        self._until = None

    # ---- discovery ----------------------------------------------------------------------
    def discovery_due(self):
        """True when host discovery is to run now; the next run is then due one interval later."""
        now = self.clock()
        if now < self._next_discovery:
            return False
        self._next_discovery = now + self.discovery_interval_s
        return True

    # ---- a generation found broken ------------------------------------------------------
    def broken_reported(self):
        """A member reported the running generation broken: no re-formation for
        ``BROKEN_SETTLE_S`` (NONE -> SETTLING)."""
        self._move(Wait.SETTLING)
        self._until = self.clock() + BROKEN_SETTLE_S

    def may_form(self):
        """False while SETTLING; once its time is over, moves to NONE and says True. True in
        every other wait (each is decided by the driver's own checks that follow)."""
        if self.wait is not Wait.SETTLING:
            return True
        if self.clock() < self._until:
            return False
        self._move(Wait.NONE)
        return True

    # ---- below --min-np -----------------------------------------------------------------
    def below_min_np(self):
        """Fewer than ``--min-np`` ready members. Returns True when the wait begins now (the
        driver says so once); a growth held meanwhile ends (a member was lost)."""
        if self.wait is Wait.BELOW_MIN_NP:
            return False
        self._move(Wait.BELOW_MIN_NP, self.clock())
        return True

    def min_np_timed_out(self):
        """True once the job has been below ``--min-np`` for longer than ``elastic_timeout_s``."""
        return self.wait is Wait.BELOW_MIN_NP and self.clock() - self._since > self.elastic_timeout_s

    def enough_workers(self):
        """At least ``--min-np`` ready members: the wait for them (if any) ends."""
        if self.wait is Wait.BELOW_MIN_NP:
            self._move(Wait.NONE)

    # ---- growth -------------------------------------------------------------------------
    def hold_growth(self, formed, starting):
        """A pending change only adds workers. True while it should wait: the current
        generation has not ``formed`` and the ready timeout has not passed since the hold
        began, or other workers are ``starting`` and ``GROW_SETTLE_S`` has not passed. False
        releases the hold (HOLDING_GROWTH -> NONE)."""
        now = self.clock()
        if self.wait is not Wait.HOLDING_GROWTH:
            self._move(Wait.HOLDING_GROWTH, now)
        waited = now - self._since
        if (waited < self.ready_timeout_s and not formed) or (waited < GROW_SETTLE_S and starting):
            return True
        self._move(Wait.NONE)
        return False

    def no_growth_hold(self):
        """The pending change is not (or no longer) one that only adds workers, or it was
        dropped: a growth held (if any) ends."""
        if self.wait is Wait.HOLDING_GROWTH:
            self._move(Wait.NONE)
