"""One rank of a function job (``tfring.run``, ``tfring.spark.run``):
``python -m tfring._runner.function_worker``.

Reads ``(fn, args, kwargs)`` from the job's store (TFRING_STORE_ADDR, TFRING_SECRET, as
every tfring worker has), calls ``fn``, and reports its return value or its exception
under TFRING_RUN_KEYS (protocol in function_job.py). Exit code 0 when fn returned, 1 when
it raised (its traceback also goes to stderr, so the launcher's output shows it with the
rank in front). When fn raises while tfring is initialized, the other ranks learn why at
once (``tfring.shutdown(reason)``): their collectives fail naming this rank.

Blocking: waits at most TFRING_START_TIMEOUT_S (default 30 s) for the function.
"""

import contextlib
import os
import pickle
import sys
import traceback

from tfring._runner import function_job, jobenv

FETCH_TIMEOUT_S = 30.0


def _rank():
    """This rank now: tfring's when initialized (elastic ranks move), else the launcher's."""
    from tfring._basics import basics

    with contextlib.suppress(Exception):  # shut down in between: fall back to the launcher's
        if basics.is_initialized():
            return basics.rank()
    return int(os.environ.get("TFRING_RANK", "-1"))


def _client():
    from tfring import _core

    host, port = jobenv.split_store_address(os.environ["TFRING_STORE_ADDR"])
    timeout = float(os.environ.get("TFRING_START_TIMEOUT_S") or FETCH_TIMEOUT_S)
    return _core.StoreClient(host, port, os.environ[jobenv.SECRET], timeout), timeout


def _failed(e):
    import cloudpickle

    try:
        exception = cloudpickle.dumps(e)
        pickle.loads(exception)  # some exceptions pickle but cannot be rebuilt
    except Exception:  # noqa: BLE001 - the text form goes anyway
        exception = b""
    text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    return function_job.Report(_rank(), False, error=f"{type(e).__name__}: {e}", traceback=text,
                               exception=exception)


def _tell_peers(e):
    from tfring._basics import basics

    with contextlib.suppress(Exception):  # already failing: report the user's error
        if basics.is_initialized():
            basics.shutdown(reason=f"{type(e).__name__}: {e}"[:2000])


def run():
    """Runs the function; returns the exit code."""
    import cloudpickle

    prefix = os.environ.get(function_job.KEYS_ENV, function_job.DEFAULT_PREFIX)
    client, timeout = _client()
    try:
        fn, args, kwargs = function_job.unpack(client.get(function_job.FN_KEY, timeout))
        value = fn(*args, **kwargs)
        try:
            report = function_job.Report(_rank(), True, value=cloudpickle.dumps(value))
        except Exception as e:
            raise TypeError(f"the value fn returned ({type(value).__name__}) cannot be pickled: {e}") from e
        if len(report.value) > function_job.MAX_BYTES:
            raise ValueError(f"the value fn returned pickles to {len(report.value) >> 20} MiB, more than the "
                             f"job's store carries ({function_job.MAX_BYTES >> 20} MiB): write it to a file")
    except BaseException as e:  # noqa: BLE001 - KeyboardInterrupt too (the launcher forwards Ctrl-C)
        report, failure = _failed(e), e
        traceback.print_exc()
        sys.stderr.flush()
    else:
        failure = None
    # Report before telling the peers: their own failures (caused by this one) come later.
    n = client.add(prefix + "count", 1)
    client.set(f"{prefix}report/{n}", pickle.dumps(report))
    if failure is not None:
        _tell_peers(failure)
    return 0 if report.ok else 1


def main():
    code = run()
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    sys.exit(code)


if __name__ == "__main__":
    main()
