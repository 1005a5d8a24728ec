"""tfring.spark.run on a real Spark cluster on this machine: ``local-cluster[2,1,1024]`` (a
master, two workers and their executor JVMs, one core each), pyspark from PyPI, Java 17.

One cluster serves every test (module fixture; the JVMs take most of the time). Needs
``java`` on PATH and pyspark: without them the tests fail naming what to install (CI
installs both: requirements.txt, tools/system_deps.sh).
"""

import json
import os
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

from tfring.runner.function_job import RankError

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
    from tests.workers import spark_fit

    out = tmp_path / "weights.json"
    env = dict(os.environ, **RANK_ENV)
    reference = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "tfringrun"), "-np", "2",
                                  sys.executable, os.path.join(REPO, "tests", "workers", "spark_fit.py"), str(out)],
                                 env=env)  # meanwhile, the same fit on Spark
    try:
        cloudpickle.register_pickle_by_value(spark_fit)  # the executors need not import tests/
        try:
            on_spark = tfring.spark.run(spark_fit.train, num_proc=2)
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
