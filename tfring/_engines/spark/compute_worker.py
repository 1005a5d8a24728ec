"""The tf.data compute job on Spark executors (``horovod.spark.tensorflow.compute_worker``):

    python -m tfring.spark.compute_worker /shared/compute.json [--dispatchers 1] \\
        [--dispatcher-side compute|training] [--dispatchers-nic eth0] [--num-proc N] [--timeout 60]
    # or, as Horovod's, through spark-submit:
    spark-submit --master spark://host:7077 \\
        "$(python -c 'import tfring.spark.compute_worker as w; print(w.__file__)')" /shared/compute.json

This process is the Spark driver (``SparkSession.builder.getOrCreate()``: the master comes
from spark-submit, ``PYSPARK_SUBMIT_ARGS`` or spark-defaults.conf). As in Horovod, the
driver serves the compute job's registry (an authenticated tfring store, advertised at
``spark.driver.host``) and writes the ``TfDataServiceConfig`` file; the compute ranks are
the barrier tasks of one ``tfring.spark.run`` stage (``--num-proc``, default the cluster's
default parallelism, as Horovod's), each running ``compute_worker_fn`` (a tf.data worker,
and on the first rank of each group the dispatcher with ``--dispatcher-side compute``).
The training job (tfring.spark.run on the same cluster, or tfringrun) reads the same file
and ends the compute job with ``config.compute_client().shutdown()``; this process then
removes the file, stops its SparkSession and exits 0. When the stage fails (a rank gave up
waiting for its dispatcher, say) it writes why to ``<config file>.stopped`` (which the
training side's errors name), removes the file and exits 1. SIGTERM stops it the same way.

Differences from Horovod's arguments: ``--dispatchers-nic`` is optional (without it each
rank advertises its host's address, ``socket.getfqdn()``'s); ``--dispatchers-work-dir``
(fault-tolerant dispatchers) is refused; ``--num-proc`` and ``--timeout`` are tfring's.
"""

import argparse
import os
import signal
import sys


def _compute_rank(config, timeout, nic):
    """One compute rank on its executor (``tfring.spark.run``'s fn)."""
    if nic:
        from tfring._bootstrap.network import interface_address

        os.environ["TFRING_BIND_ADDR"] = interface_address(nic)  # compute_rank.this_host()
    from tfring._tensorflow.data.compute_service import compute_worker_fn

    compute_worker_fn(config, timeout)


def run(configfile, dispatchers=1, dispatcher_side="compute", num_proc=None, timeout=60, dispatchers_nic=None,
        start_timeout=None, verbose=1):
    """Runs the compute job as ``num_proc`` barrier tasks of the active SparkSession until
    the training side shuts it down. Blocking; returns None.

    Raises:
      ValueError: ``num_proc`` is not a multiple of ``dispatchers``, or exceeds the free slots.
      tfring._runner.function_job.RankError: a compute rank raised (it gave up waiting for
        its dispatcher, say); recorded in ``<configfile>.stopped`` too.
      RuntimeError: no active SparkSession, or the stage failed before any rank reported.
    """
    from tfring._engines.data_service.compute_worker import serve_registry
    from tfring._engines.spark import driver

    sc = driver._session().sparkContext
    workers = int(num_proc or sc.defaultParallelism)
    if workers < 1 or workers % dispatchers:
        raise ValueError(f"tfring.spark.compute_worker: the compute job's {workers} ranks (--num-proc, default the "
                         f"cluster's default parallelism) must be a positive multiple of --dispatchers {dispatchers}")
    advertise = sc.getConf().get("spark.driver.host") or "127.0.0.1"
    with serve_registry(configfile, dispatchers, workers, dispatcher_side, timeout, advertise) as config:
        if verbose:
            print(f"tfring compute service on Spark: {workers} worker(s), {dispatchers} dispatcher(s) on the "
                  f"{dispatcher_side} side; config in {configfile}", flush=True)
        driver.run(_compute_rank, args=(config, timeout, dispatchers_nic), num_proc=workers,
                   start_timeout=start_timeout, verbose=verbose)


def parse(argv):
    p = argparse.ArgumentParser(prog="python -m tfring.spark.compute_worker",
                                description="The compute job of the tf.data service on Spark executors "
                                            "(horovod.spark.tensorflow.compute_worker).")
    p.add_argument("configfile", help="where the driver writes the TfDataServiceConfig for the training job")
    p.add_argument("--dispatchers", type=int, default=1, help="number of dispatchers (default 1)")
    p.add_argument("--dispatcher-side", choices=("compute", "training"), default="compute",
                   help="where the dispatchers run (default: compute)")
    p.add_argument("--dispatchers-nic", default=None,
                   help="network interface whose address each compute rank advertises for its tf.data servers "
                        "(default: its host's address)")
    p.add_argument("--dispatchers-work-dir", default=None,
                   help="Horovod's fault-tolerant dispatchers: not supported by tfring (refused)")
    p.add_argument("--num-proc", type=int, default=None,
                   help="compute ranks = Spark barrier tasks (default: the cluster's default parallelism)")
    p.add_argument("--timeout", type=int, default=60, help="seconds every registration may take (default 60)")
    p.add_argument("--start-timeout", type=float, default=None,
                   help="seconds to wait for free task slots (default 30)")
    ns = p.parse_args(argv)
    if ns.dispatchers < 1:
        p.error(f"--dispatchers must be >= 1. Received: {ns.dispatchers}")
    if ns.num_proc is not None and ns.num_proc < 1:
        p.error(f"--num-proc must be >= 1. Received: {ns.num_proc}")
    if ns.dispatchers_work_dir is not None:
        p.error("--dispatchers-work-dir (Horovod's fault-tolerant dispatchers) is not supported: tfring's "
                "dispatchers keep their state in memory; drop the option")
    return ns


def _stop_on_sigterm(signum, frame):
    del frame
    raise SystemExit(f"tfring.spark.compute_worker: stopped by signal {signum}")


def main(argv=None):
    """The command line: parses ``argv``, starts (or joins) the SparkSession, runs the
    compute job, stops the session. Returns the exit code."""
    ns = parse(sys.argv[1:] if argv is None else argv)
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("tfring compute job").getOrCreate()
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    try:
        run(ns.configfile, dispatchers=ns.dispatchers, dispatcher_side=ns.dispatcher_side, num_proc=ns.num_proc,
            timeout=ns.timeout, dispatchers_nic=ns.dispatchers_nic, start_timeout=ns.start_timeout)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    # Run as a file: take main from the module, so the ranks' function is
    # tfring._engines.spark.compute_worker._compute_rank, not a copy pickled from __main__.
    from tfring._engines.spark.compute_worker import main as _main

    sys.exit(_main())
