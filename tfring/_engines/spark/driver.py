"""``tfring.spark.run``: a tfring job on an Apache Spark cluster (``horovod.spark.run``).

The driver (this process) checks the cluster has the slots, serves the job's authenticated
store, puts fn there (cloudpickle), and runs one barrier stage of ``num_proc`` tasks; task i
is rank i (task.py). Results and exceptions come back through the store, by rank.

The store listens on every interface of the driver and is advertised at
``spark.driver.host``; the job secret reaches the tasks inside the task closure, which Spark
sends over its own RPC: on an untrusted network enable ``spark.authenticate`` and
``spark.network.crypto.enabled``.

Blocking: returns when the stage ends. Waits at most ``start_timeout`` seconds for
executors to offer ``num_proc`` slots before failing (a barrier stage larger than the
cluster would otherwise wait and retry for minutes).
"""

import os
import re
import sys
import time
import warnings

from tfring._engines.spark import task as task_lib
from tfring._runner import function_job, jobenv

SLOT_POLL_S = 0.2
DEFAULT_START_TIMEOUT_S = 30.0


def _session():
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise ImportError("tfring.spark needs pyspark (and Java 17): pip install pyspark") from None
    spark = SparkSession.getActiveSession()
    if spark is None:
        raise RuntimeError("tfring.spark.run needs an active SparkSession on this thread: create one first, e.g. "
                           "SparkSession.builder.master('spark://host:7077').getOrCreate()")
    return spark


def slots(sc):
    """(free, total) barrier task slots of the cluster now: ``total`` is how many tasks
    its executors run at once, ``free`` that minus the tasks running."""
    jsc = sc._jsc.sc()
    try:
        total = int(jsc.maxNumConcurrentTasks(jsc.resourceProfileManager().defaultResourceProfile()))
    except Exception:  # noqa: BLE001 - a Spark without these (developer) methods
        total = int(sc.defaultParallelism)
    try:
        busy = sum(int(e.numRunningTasks()) for e in jsc.statusTracker().getExecutorInfos())
    except Exception:  # noqa: BLE001 - no busy count: assume idle
        busy = 0
    return max(0, total - busy), total


def _wait_for_slots(sc, num_proc, timeout):
    deadline = time.monotonic() + timeout
    while True:
        free, total = slots(sc)
        if free >= num_proc:
            return
        if time.monotonic() >= deadline:
            raise ValueError(
                f"tfring.spark.run: num_proc={num_proc} needs {num_proc} task slots at once (one barrier stage), but "
                f"the cluster has {free} free ({total} in all, after waiting {timeout:g} s for executors): lower "
                "num_proc or add executors / cores")
        time.sleep(SLOT_POLL_S)


def _settings(env):
    """The variables every rank gets on top of its executor's environment: all of ``env``
    when given (as horovod.spark.run), else the TFRING_* settings of this process's
    environment (the driver's PATH or JAVA_HOME need not suit the executors). Identity and
    store variables are always tfring's own."""
    if env is None:
        env = {k: v for k, v in os.environ.items() if k.startswith("TFRING_")}
    return {k: str(v) for k, v in env.items() if k not in _IDENTITY}


_IDENTITY = ("TFRING_RANK", "TFRING_SIZE", "TFRING_LOCAL_RANK", "TFRING_LOCAL_SIZE", "TFRING_CROSS_RANK",
             "TFRING_CROSS_SIZE", "TFRING_STORE_ADDR", jobenv.SECRET, "TFRING_JOB_ID")


TRACEBACK_LINES = 6  # of the executors' Python traceback, above its exception line
_JAVA_FRAME = re.compile(r"\s+(at [\w$.<>/-]+\(.*\)|\.\.\. \d+ more)\s*$")
_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+\s*$")


def python_exception(text):
    """The first executor-side Python exception in a Spark error text (py4j's
    Py4JJavaError, or a Java exception's toString with its causes): ``(tail, line)``, the
    last ``TRACEBACK_LINES`` lines of its traceback and the exception's text
    (``ModuleNotFoundError: No module named 'tfring'``); None when the text holds none.

    Spark carries a Python worker's error as ``org.apache.spark.api.python.PythonException:
    Traceback (most recent call last):`` and the traceback's lines, up to the Java stack
    (indented ``at pkg.Class.method(File.java:1)`` frames) or the next exception of the
    chain (``Caused by:``).
    """
    start = text.find("PythonException: ")
    if start < 0:
        return None
    lines = []
    for line in text[start + len("PythonException: "):].splitlines():
        if _JAVA_FRAME.match(line) or line.startswith("Caused by:"):
            break
        if not _SQLSTATE.match(line):  # Spark 4 ends the exception's text with its error class's state
            lines.append(line.rstrip())
    if lines and "Traceback (most recent call last):" in lines[0]:
        lines[0] = "Traceback (most recent call last):"  # after Spark 4's "[PYTHON_EXCEPTION] An exception ...: "
    # the exception: from the first unindented line after the last frame to the end (its
    # message may have lines of its own)
    frames = [i for i, line in enumerate(lines) if line.startswith('  File "')]
    heads = [i for i, line in enumerate(lines) if i > (frames[-1] if frames else -1) and line.strip()
             and not line[0].isspace() and not line.startswith("Traceback (most recent call last)")]
    if not heads:
        return None
    body = [line for line in lines[:heads[0]] if line.strip() and not line.startswith("Traceback (most recent call")]
    return "\n".join(body[-TRACEBACK_LINES:]), "\n".join(lines[heads[0]:]).strip()


def _error_texts(error):
    """The texts of a failed stage's error: its own (py4j puts the Java stack trace with
    its causes there), then the Java exception's and its causes' toString."""
    yield str(error)
    java = getattr(error, "java_exception", None)
    for _ in range(8):
        if java is None:
            return
        try:
            yield str(java.toString())
            java = java.getCause()
        except Exception:  # noqa: BLE001 - the JVM is gone: the texts so far must do
            return


def _executor_python(sc):
    """What names the executors' Python: (its path or command, how it was chosen)."""
    chosen = getattr(sc, "pythonExec", None) or os.environ.get("PYSPARK_PYTHON")
    if chosen and chosen != "python3":
        return chosen, "PYSPARK_PYTHON when this SparkContext started"
    return "python3", ("the first python3 on the executors' PATH: PYSPARK_PYTHON was not set when this "
                       "SparkContext started")


def _import_hint(sc):
    python, how = _executor_python(sc)
    try:
        conf_python = sc.getConf().get("spark.pyspark.python")
    except Exception:  # noqa: BLE001 - no conf: nothing to add
        conf_python = None
    note = (f" (spark.pyspark.python={conf_python} on the session does not choose the Python of the workers this "
            "driver starts)") if conf_python and conf_python != python else ""
    return (f"The executors ran their Python workers with {python} ({how}){note}, and that Python cannot import "
            f"tfring. Set PYSPARK_PYTHON={sys.executable} (this driver's Python) in the environment before the "
            "SparkSession and its JVM start, when the executors' hosts have it; or install tfring (with its "
            f"dependencies) into {python} on every executor host")


def stage_failure_message(sc, error):
    """Why the barrier stage failed when no rank reported: the first Python exception on
    the executors (the end of its traceback and its line), and for an import failure which
    Python the executors ran and what to set; else the first line of Spark's error."""
    found = next(filter(None, map(python_exception, _error_texts(error))), None)
    if found is None:
        first = str(error).strip().splitlines()
        return ("tfring.spark.run: the barrier stage failed before any rank reported: "
                f"{first[0] if first else type(error).__name__}")
    tail, line = found
    message = ("tfring.spark.run: the barrier stage failed before any rank reported: an executor's Python raised "
               f"{line.splitlines()[0]}")
    if tail:
        message += f"\n\nEnd of its traceback on the executor:\n{tail}\n{line}"
    if line.startswith(("ModuleNotFoundError", "ImportError")):
        message += f"\n\n{_import_hint(sc)}"
    return message


def _raise_stage_failure(sc, client, error):
    failure = function_job.first_failure(function_job.read_reports(client))
    if failure is not None:
        function_job.raise_failure(failure, caller="tfring.spark.run")
    raise RuntimeError(stage_failure_message(sc, error)) from error


def run(fn, args=(), kwargs=None, num_proc=None, start_timeout=None, extra_mpi_args=None, env=None, stdout=None,
        stderr=None, verbose=1, nics=None, prefix_output_with_timestamp=False, executable=None):
    """Runs ``fn(*args, **kwargs)`` as ``num_proc`` tfring ranks in Spark barrier tasks.

    Args:
      fn, args, kwargs: as ``tfring.run`` (sent with cloudpickle; fn calls tfring.init()).
      num_proc: ranks = barrier tasks (default: the cluster's default parallelism).
      start_timeout: seconds to wait for free slots and, on the ranks, for each other
        (TFRING_START_TIMEOUT_S); default 30.
      env: variables for every rank (default: the TFRING_* settings of os.environ).
      executable: the Python of the rank processes on the executors (default: the
        executors' own Python, PYSPARK_PYTHON).
      verbose: 0 silences the driver's one-line notes.
      stdout, stderr, nics, prefix_output_with_timestamp: accepted for horovod.spark.run
        compatibility, unused: each rank's output (with its rank in front) goes to its
        executor's stdout/stderr log (Spark UI, Executors), and the ranks use the address
        of each executor's host.
      extra_mpi_args: refused (tfring does not run mpirun).

    Returns:
      fn's return values, by rank.

    Raises:
      RuntimeError: no active SparkSession; or the stage failed without a rank's report
        (the message shows the executors' first Python exception, and for an import
        failure which Python they ran and what to set: ``stage_failure_message``).
      ImportError: pyspark is not installed.
      ValueError: ``num_proc`` exceeds the free slots (names both numbers).
      TypeError: fn or an argument cannot be pickled (names which).
      tfring._runner.function_job.RankError: a rank's fn raised (rank, traceback; the
        exception is the ``__cause__``).
    """
    from tfring import _core
    from tfring._runner.rendezvous import Store

    if extra_mpi_args:
        raise ValueError("tfring.spark.run does not use MPI: drop extra_mpi_args (tfring's settings go in env as "
                         "TFRING_* variables)")
    if stdout is not None or stderr is not None:
        warnings.warn("tfring.spark.run: stdout/stderr are not used; each rank's output goes to its executor's "
                      "stdout/stderr log", RuntimeWarning, stacklevel=2)
    del nics, prefix_output_with_timestamp
    spark = _session()
    sc = spark.sparkContext
    num_proc = int(num_proc or sc.defaultParallelism)
    if num_proc < 1:
        raise ValueError(f"tfring.spark.run: num_proc must be >= 1. Received: {num_proc}")
    timeout = float(start_timeout or DEFAULT_START_TIMEOUT_S)
    payload = function_job.pack(fn, args, kwargs, caller="tfring.spark.run")
    _wait_for_slots(sc, num_proc, timeout)
    settings = _settings(env)
    settings.setdefault("TFRING_START_TIMEOUT_S", f"{timeout:g}")
    advertise = sc.getConf().get("spark.driver.host") or "127.0.0.1"
    with Store(host="0.0.0.0", advertise=advertise) as store:
        client = _core.StoreClient(*jobenv.split_store_address(store.address), store.secret, 30.0)
        client.set(function_job.FN_KEY, payload)
        task = task_lib.make_task(store.env(), settings, executable)
        if verbose:
            print(f"tfring.spark.run: {num_proc} rank(s) as barrier tasks; store at {store.address}", flush=True)
        sc.setJobDescription(f"tfring.spark.run: {num_proc} rank(s)")
        try:
            sc.parallelize(range(num_proc), num_proc).barrier().mapPartitions(task).collect()
        except Exception as e:  # noqa: BLE001 - py4j's Py4JJavaError: the stage failed
            _raise_stage_failure(sc, client, e)
        finally:
            sc.setJobDescription(None)
        reports = function_job.read_reports(client)
    failure = function_job.first_failure(reports)
    if failure is not None:
        function_job.raise_failure(failure, caller="tfring.spark.run")
    return function_job.values_by_rank(reports, num_proc, caller="tfring.spark.run")
