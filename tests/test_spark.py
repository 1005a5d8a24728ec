"""tfring.spark.run on a real Spark cluster on this machine: ``local-cluster[2,1,1024]`` (a
master, two workers and their executor JVMs, one core each), pyspark from PyPI, Java 17.

One cluster serves every test (module fixture; the JVMs take most of the time), but for
executors that cannot import tfring: that test runs its own one-executor cluster in a
subprocess (another PYSPARK_PYTHON needs another SparkContext). The data-service compute
job on Spark (tfring.spark.compute_worker) serves examples/tensorflow2_data_service.py. Needs
``java`` on PATH and pyspark: without them the tests fail naming what to install (CI
installs both: requirements.txt, tools/system_deps.sh).
"""

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import venv

import numpy as np
import pytest

from tfring._runner.function_job import RankError

pytestmark = [pytest.mark.multiprocess, pytest.mark.slow, pytest.mark.timeout(240)]

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Quicker JVM start-up for a short test: C1 compiler only, serial GC.
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
RANK_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2", "OMP_NUM_THREADS": "1", "PYTHONPATH": REPO}


def _require_spark():
    if shutil.which("java") is None:
        pytest.fail("tests/test_spark.py needs Java 17 on PATH: apt-get install openjdk-17-jre-headless "
                    "(tools/system_deps.sh installs it)", pytrace=False)
    try:
        import pyspark  # noqa: F401
    except ImportError:
        pytest.fail("tests/test_spark.py needs pyspark: .venv/bin/pip install pyspark (it is in requirements.txt)",
                    pytrace=False)


def test_no_active_session_is_named():
    _require_spark()
    from pyspark.sql import SparkSession

    import tfring.spark

    if SparkSession.getActiveSession() is not None:
        pytest.skip("a SparkSession from another test module is active")
    with pytest.raises(RuntimeError, match="needs an active SparkSession"):
        tfring.spark.run(_rank_plus, args=(1,), num_proc=2)


def test_executors_that_cannot_import_tfring_are_named(tmp_path):
    """PYSPARK_PYTHON names a Python without tfring: the error shows the executors' exception
    and says which Python they ran and what to set (was: only py4j's 'An error occurred while
    calling z:...collectAndServe')."""
    _require_spark()
    venv.create(tmp_path / "bare", with_pip=False)  # this Python's version, no packages
    bare = str(tmp_path / "bare" / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the executors inherit it
    env.update(PYSPARK_PYTHON=bare, **{k: v for k, v in RANK_ENV.items() if k != "PYTHONPATH"})
    result = subprocess.run([sys.executable, os.path.join(REPO, "tests", "workers", "spark_no_tfring.py")],
                            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=200, check=False)
    out = result.stdout + result.stderr
    assert "<message>" in result.stdout, out
    message = result.stdout.split("<message>\n", 1)[1].split("\n</message>", 1)[0]
    assert message.startswith("tfring.spark.run: the barrier stage failed before any rank reported: an executor's "
                              "Python raised ModuleNotFoundError: No module named 'tfring'"), message
    assert "End of its traceback on the executor:" in message, message
    assert f"The executors ran their Python workers with {bare} (PYSPARK_PYTHON when this SparkContext " \
           "started)" in message, message
    assert f"Set PYSPARK_PYTHON={sys.executable} (this driver's Python)" in message, message
    assert "collectAndServe" not in message, message


SAMPLE = os.path.join(REPO, "tests", "data", "spark_no_tfring_error.txt")


def test_the_executors_python_exception_is_read_from_spark_error_text():
    """driver.python_exception on a recorded py4j error text of the test above (pyspark
    4.3.0: Py4JJavaError, the Java stack trace with the PythonException and its causes)."""
    from tfring._engines.spark import driver

    with open(SAMPLE) as f:
        text = f.read()
    assert "[PYTHON_EXCEPTION]" in text and " SQLSTATE: 38000" in text  # Spark 4's wrapping, left out
    tail, line = driver.python_exception(text)
    assert line == "ModuleNotFoundError: No module named 'tfring'"
    assert tail.splitlines()[-2:] == ['  File "/work/wt-e/tfring/_engines/spark/task.py", line 39, in task',
                                      "    from tfring._runner import jobenv, rendezvous, spawn"], tail
    assert "\tat " not in tail and "Traceback" not in tail and "SQLSTATE" not in tail
    assert len(tail.splitlines()) == driver.TRACEBACK_LINES
    # a short traceback: its first frame is kept, Spark's prefix is not
    short = ("org.apache.spark.api.python.PythonException: [PYTHON_EXCEPTION] An exception was thrown from the "
             'Python worker: Traceback (most recent call last):\n  File "x.py", line 1, in f\n    g()\n'
             "ValueError: v\n SQLSTATE: 38000\n\tat a.B.c(B.java:1)\n")
    assert driver.python_exception(short) == ('  File "x.py", line 1, in f\n    g()', "ValueError: v")
    # a Java-only error text (no Python worker failed): nothing found, the first line is used
    assert driver.python_exception("org.apache.spark.SparkException: Job aborted\n\tat a.b.C.d(C.java:1)") is None
    # an exception message of several lines is kept whole; the Java frames end it
    text = ("org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
            '  File "/x/task.py", line 3, in task\n    raise RuntimeError("a\\nb")\nRuntimeError: a\nb\n\n'
            "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(X.scala:1)\n")
    assert driver.python_exception(text) == ('  File "/x/task.py", line 3, in task\n    raise RuntimeError("a\\nb")',
                                             "RuntimeError: a\nb")


def test_compute_worker_arguments_follow_horovods(capsys):
    from tfring._engines.spark import compute_worker

    ns = compute_worker.parse(["/tmp/c.json", "--dispatchers", "2", "--dispatchers-nic", "eth0",
                               "--dispatcher-side", "training"])
    assert (ns.configfile, ns.dispatchers, ns.dispatchers_nic, ns.dispatcher_side, ns.num_proc, ns.timeout) == \
        ("/tmp/c.json", 2, "eth0", "training", None, 60)
    for argv, refused in ((["c.json", "--dispatchers-work-dir", "/w"], "--dispatchers-work-dir"),
                          (["c.json", "--dispatchers", "0"], "--dispatchers must be >= 1"),
                          (["c.json", "--dispatcher-side", "driver"], "invalid choice")):
        with pytest.raises(SystemExit) as info:
            compute_worker.parse(argv)
        assert info.value.code == 2 and refused in capsys.readouterr().err


@pytest.fixture(scope="module")
def spark():
    _require_spark()
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable  # the executors run this venv's Python
    builder = (SparkSession.builder.master("local-cluster[2,1,1024]").appName("tfring-test-spark")
               .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.driver.extraJavaOptions", JVM_OPTIONS)
               .config("spark.executor.extraJavaOptions", JVM_OPTIONS))
    for name, value in RANK_ENV.items():
        builder = builder.config(f"spark.executorEnv.{name}", value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def _rank_plus(x):
    import os

    return int(os.environ["TFRING_RANK"]) + x


def _fails_on_rank_1():

    import tfring

    tfring.init()
    if tfring.rank() == 1:
        raise ValueError("bad partition on rank 1")
    tfring.barrier()  # fails once rank 1 has gone
    return 0


def test_results_by_rank(spark):
    import tfring.spark

    assert tfring.spark.run(_rank_plus, args=(100,), num_proc=2) == [100, 101]


def test_errors_name_the_problem(spark):
    import tfring.spark

    with pytest.raises(ValueError, match=r"num_proc=3 needs 3 task slots at once \(one barrier stage\), but the cluster "
                                         r"has 2 free \(2 in all"):
        tfring.spark.run(_rank_plus, args=(1,), num_proc=3, start_timeout=1)
    with pytest.raises(TypeError, match=r"tfring.spark.run cannot send args\[0\] \(lock\)"):
        tfring.spark.run(_rank_plus, args=(threading.Lock(),), num_proc=2)


def test_a_rank_that_raises(spark):
    import tfring.spark

    with pytest.raises(RankError) as info:
        tfring.spark.run(_fails_on_rank_1, num_proc=2)
    assert info.value.rank == 1
    assert "rank 1 raised ValueError: bad partition on rank 1" in str(info.value)
    assert "_fails_on_rank_1" in info.value.remote_traceback
    # the cluster is usable again
    assert tfring.spark.run(_rank_plus, args=(0,), num_proc=2) == [0, 1]


def test_keras_fit_weights_equal_tfringrun(spark, tmp_path):
    import cloudpickle

    import tfring.spark
    from tests.helpers import rank_executable, rank_python
    from tests.workers import spark_fit

    out = tmp_path / "weights.json"
    env = dict(os.environ, **RANK_ENV)
    # Both jobs' ranks are forks of the suite's fork server (TensorFlow imported once).
    reference = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "tfringrun"), "-np", "2",
                                  *rank_python(fork=True), os.path.join(REPO, "tests", "workers", "spark_fit.py"),
                                  str(out)], env=env)  # meanwhile, the same fit on Spark
    try:
        cloudpickle.register_pickle_by_value(spark_fit)  # the executors need not import tests/
        try:
            on_spark = tfring.spark.run(spark_fit.train, num_proc=2, executable=rank_executable(tmp_path))
        finally:
            cloudpickle.unregister_pickle_by_value(spark_fit)
        assert reference.wait(timeout=120) == 0
    finally:
        if reference.poll() is None:
            reference.kill()
            reference.wait()
    with open(out) as f:
        by_tfringrun = json.load(f)
    for a, b in zip(on_spark[0], on_spark[1], strict=True):
        np.testing.assert_array_equal(a, b)  # the two ranks agree
    for a, b in zip(on_spark[0], by_tfringrun, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)  # and equal tfringrun's run


def test_compute_worker_on_spark_serves_the_data_service_example(spark, tmp_path):
    """horovod.spark.tensorflow.compute_worker's counterpart: the compute job as 2 Spark
    barrier tasks (this driver serves the registry and writes the config file), and the
    data-service example's training job (2 tfring.run ranks) reading from it; the example's
    shutdown() ends the stage, and the file goes."""
    from tfring._engines.spark import compute_worker
    from tfring._tensorflow.data.compute_service import TfDataServiceConfig

    config_file = tmp_path / "compute.json"
    from tests.helpers import rank_python

    # the example's driver imports TensorFlow: a fork of the suite's fork server
    example = subprocess.Popen([*rank_python(fork=True), os.path.join(REPO, "examples", "tensorflow2_data_service.py"),
                                "--compute-service-config-file", str(config_file), "--training-tasks", "2",
                                "--reuse-dataset", "--steps", "4", "--epochs", "1"],
                               env=dict(os.environ, **RANK_ENV), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    output = []

    def watch():  # the example's output; should it end without shutdown(), end the compute job
        output.append(example.communicate()[0])
        with contextlib.suppress(Exception):  # the compute job may end meanwhile
            if config_file.exists():
                TfDataServiceConfig.read(str(config_file)).compute_client().shutdown()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        compute_worker.run(str(config_file), num_proc=2, timeout=90, dispatchers_nic="lo", verbose=0)
    finally:
        watcher.join(timeout=150)
        if example.poll() is None:
            example.kill()
    out = "".join(output)
    assert example.returncode == 0, out
    assert "identical weights: True" in out, out
    assert not config_file.exists()
