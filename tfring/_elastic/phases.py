"""The phases of an elastic job (``ElasticJob`` in driver.py) and the moves between
them, checked: the job is in exactly one phase, and ``check_move`` refuses a move the table
does not list.

    STARTING ──publish generation 1──► RUNNING ◄──publish the next generation──┐
       │                                  │  └───────────────────────────────────┘
       ├──────── a worker exits 0 ────────┴──► FINISHING ──a member then fails──► FAILING_AFTER_FINISH
       ├── the driver ends the job (from STARTING or RUNNING) ──► ENDING
       └── SIGINT/SIGTERM/SIGHUP (from any phase but ENDING) ──► SIGNALLED

  STARTING   no generation has formed: the first workers start and become ready (or the
             script fails before init() on all of them: ENDING)
  RUNNING    generation g runs; a change (a lost or removed worker, a ready one, a
             generation reported broken) re-forms it as g + 1
  FINISHING  a worker exited 0: no more generations; the job waits for the others and exits 0
  FAILING_AFTER_FINISH
             a member failed after that: every worker is stopped, the job exits with its code
  ENDING     the driver ended the job (``end_reason``: the script fails before init(), too
             few workers for --elastic-timeout, --reset-limit): the workers are told, then
             stopped; the job exits with ``end_code``
  SIGNALLED  the launcher got a signal, passed on to every worker; the job exits 128 + N

ENDING and SIGNALLED are final; a second signal kills every worker at once, in either.
What the phases mean for the driver's loop is on ``Phase`` (``forms_generations``,
``finishing``, ``ending``). Pure data; thread-safety is the job's (main thread only).
"""

import enum


class Phase(enum.Enum):
    STARTING = "starting"
    RUNNING = "running"
    FINISHING = "finishing"
    FAILING_AFTER_FINISH = "failing after finish"
    ENDING = "ending"
    SIGNALLED = "signalled"

    @property
    def forms_generations(self):
        """The driver starts workers and publishes generations."""
        return self in (Phase.STARTING, Phase.RUNNING)

    @property
    def finishing(self):
        """A worker finished training: the job re-forms no more."""
        return self in (Phase.FINISHING, Phase.FAILING_AFTER_FINISH)

    @property
    def ending(self):
        """The driver stops every worker and reacts to nothing else but their exits."""
        return self in (Phase.ENDING, Phase.SIGNALLED)


MOVES = {
    Phase.STARTING: {Phase.RUNNING, Phase.FINISHING, Phase.ENDING, Phase.SIGNALLED},
    Phase.RUNNING: {Phase.RUNNING, Phase.FINISHING, Phase.ENDING, Phase.SIGNALLED},
    Phase.FINISHING: {Phase.FAILING_AFTER_FINISH, Phase.SIGNALLED},
    Phase.FAILING_AFTER_FINISH: {Phase.SIGNALLED},
    Phase.ENDING: set(),
    Phase.SIGNALLED: set(),
}


class PhaseError(RuntimeError):
    """A move the table does not list: a bug in the driver, never a user's error."""


def check_move(current, new):
    """Returns ``new`` when the job may move from ``current`` to it; raises ``PhaseError``."""
    if new not in MOVES[current]:
        allowed = ", ".join(sorted(p.name for p in MOVES[current])) or "none (final)"
        raise PhaseError(f"elastic job: no move from {current.name} to {new.name} (allowed: {allowed}); "
                         "see tfring/_elastic/phases.py")
    return new
