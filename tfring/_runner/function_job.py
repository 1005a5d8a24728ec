"""A job that runs one Python function on every rank (``tfring.run``, ``tfring.spark.run``):
the function travels to the ranks and their results come back through the job's store.

Protocol (keys in the job's authenticated store; ``prefix`` is ``TFRING_RUN_KEYS``):
  ``tfring.run/fn``        set by the caller before any rank starts: pickle of
                           ``(lines, call)``, where ``call`` is the cloudpickle of
                           ``(fn, args, kwargs)`` and ``lines`` the source lines of the
                           files whose functions it sends by value (sources.py).
  ``<prefix>count``        each rank adds 1 once ``fn`` has returned or raised; the value
                           it gets, n, is its report's place in time (1 = first).
  ``<prefix>report/<n>``   that rank's ``Report`` (pickled), set right after.
The caller reads the reports once every rank has ended, so no read ever waits long.

The source of functions sent by value travels with them (sources.py), so
``inspect.getsource``, AutoGraph and tracebacks work on the ranks.

The store carries at most 64 MiB per message: a function with its arguments, or one
rank's return value, must stay below ``MAX_BYTES``. Pass large data as a path instead.
"""

import dataclasses
import pickle

from tfring._runner import sources

FN_KEY = "tfring.run/fn"
KEYS_ENV = "TFRING_RUN_KEYS"
DEFAULT_PREFIX = "tfring.run/"
MAX_BYTES = 60 << 20
READ_WAIT_S = 0.5  # a report whose count was taken but never set (rank killed in between)


class RankError(RuntimeError):
    """A rank's function raised. ``rank`` is that rank, ``remote_traceback`` its traceback
    as text; the exception itself (when it could be pickled) is the ``__cause__``."""

    def __init__(self, message, rank, remote_traceback):
        super().__init__(message)
        self.rank = rank
        self.remote_traceback = remote_traceback


@dataclasses.dataclass
class Report:
    rank: int  # the rank when fn ended (-1: unknown)
    ok: bool
    value: bytes = b""  # cloudpickle of fn's return value (ok)
    error: str = ""  # "TypeName: message" (not ok)
    traceback: str = ""
    exception: bytes = b""  # cloudpickle of the exception, when it pickles


def _cloudpickle():
    try:
        import cloudpickle
    except ImportError:
        raise ImportError("tfring.run and tfring.spark.run send the function with cloudpickle: "
                          "pip install cloudpickle") from None
    return cloudpickle


def pack(fn, args, kwargs, caller="tfring.run"):
    """The payload for the ranks: cloudpickle of ``(fn, args, kwargs)`` with the source of
    what it sends by value (module docstring; ``caller`` names those files on the ranks,
    e.g. ``<tfring.run:/home/me/train.py>``).

    Raises:
      TypeError: something cannot be pickled; the message names it (``fn``, ``args[1]``,
        ``kwargs['model']``) and the fix.
      ValueError: the whole is larger than the store carries.
    """
    cloudpickle = _cloudpickle()
    if not callable(fn):
        raise TypeError(f"{caller} needs a callable fn. Received: {fn!r}")
    args = tuple(args or ())
    kwargs = dict(kwargs or {})
    parts = [("fn", fn)] + [(f"args[{i}]", a) for i, a in enumerate(args)] + \
            [(f"kwargs[{k!r}]", v) for k, v in kwargs.items()]
    for what, obj in parts:
        try:
            cloudpickle.dumps(obj)
        except Exception as e:  # cloudpickle raises many types (TypeError, PicklingError, ...)
            raise TypeError(
                f"{caller} cannot send {what} ({type(obj).__name__}) to the ranks: cloudpickle failed "
                f"with {type(e).__name__}: {e}. Create such objects (locks, sockets, sessions, open "
                "files, TF models) inside fn instead of capturing or passing them.") from e
    call, lines = sources.dumps((fn, args, kwargs), caller)
    payload = pickle.dumps((lines, call))
    if len(payload) > MAX_BYTES:
        raise ValueError(f"{caller}: fn with its arguments pickles to {len(payload) >> 20} MiB, more than the "
                         f"job's store carries ({MAX_BYTES >> 20} MiB): pass large data as a file path")
    return payload


def unpack(payload):
    """``(fn, args, kwargs)`` from ``pack``'s bytes (on a rank), after registering the
    source lines that came with them in ``linecache``."""
    _cloudpickle()  # unpickling cloudpickled functions needs cloudpickle importable
    lines, call = pickle.loads(payload)
    sources.register(lines)
    return pickle.loads(call)


def read_reports(client, prefix=DEFAULT_PREFIX):
    """Every rank's ``Report`` in the order they were made (``client``: a
    ``_core.StoreClient``). Call once the ranks have ended."""
    from tfring import _errors as errors

    count = client.add(prefix + "count", 0)
    out = []
    for n in range(1, count + 1):
        try:
            out.append(pickle.loads(client.get(f"{prefix}report/{n}", READ_WAIT_S)))
        except errors.TimeoutError:
            continue
    return out


def first_failure(reports):
    """The failed report to blame: the earliest one whose error does not report losing
    another failed rank (``tfring rank 0: rank 1 exited: ...``, see blame.py), else the
    earliest one; None when every rank succeeded."""
    from tfring._runner import blame

    failed = [r for r in reports if not r.ok]
    ranks = {r.rank for r in failed}
    for r in failed:
        if not (blame.lost_ranks(r.error) - {r.rank}) & ranks:
            return r
    return failed[0] if failed else None


def raise_failure(report, caller="tfring.run"):
    """Raises ``RankError`` for a failed report, chained to the rank's exception."""
    cause = None
    if report.exception:
        try:
            cause = pickle.loads(report.exception)
        except Exception:  # noqa: BLE001 - a class missing here: the text still says it all
            cause = None
    where = f"rank {report.rank}" if report.rank >= 0 else "a rank"
    message = f"{caller}: {where} raised {report.error}\n\nTraceback on {where}:\n{report.traceback.rstrip()}"
    raise RankError(message, report.rank, report.traceback) from cause


def values_by_rank(reports, size, caller="tfring.run"):
    """fn's return values ordered by rank, for ``size`` ranks (None: an elastic job, where
    the workers that finished are ordered by their last rank).

    Raises:
      RuntimeError: a rank made no report (it was killed, or left with os._exit).
    """
    done = [r for r in reports if r.ok]
    if not size:  # elastic: every worker that finished, by the rank it held (stable)
        return [pickle.loads(r.value) for r in sorted(done, key=lambda r: r.rank)]
    by_rank = {r.rank: r.value for r in done}
    missing = [r for r in range(size) if r not in by_rank]
    if missing:
        raise RuntimeError(f"{caller}: rank(s) {', '.join(map(str, missing))} ended without returning a result "
                           "(killed, or left through os._exit); their output above says why")
    return [pickle.loads(by_rank[r]) for r in range(size)]
