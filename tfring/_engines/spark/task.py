"""The Spark side of ``tfring.spark.run``: what each barrier task does on its executor.

Task i of the barrier stage is rank i. It takes its local and cross ranks from the hosts
of all the stage's tasks (``BarrierTaskContext.getTaskInfos()``, in partition order), then
starts the rank as a child process (``python -m tfring._runner.function_worker``, the same
worker as ``tfring.run``) with the job's store address and secret, copies the child's
output to the executor's stdout/stderr with the rank in front, and waits for it.

A fresh process per rank: TensorFlow and tfring start clean even when Spark reuses its
Python workers, and a task killed by Spark (another rank failed, the job was cancelled)
takes its rank with it (the child dies with the task's process, see spawn.py).

Retries: tfring runs the stage as a result stage, and Spark does not retry a failed
barrier result stage (it aborts the job: "Could not recover from a failed barrier
ResultStage"), so fn never starts twice. The task still fails at once if Spark ever
starts it again (a task attempt > 0), naming the attempt.
"""

import os
import sys
import time

POLL_S = 0.1
DRAIN_S = 2.0


def make_task(store_env, settings, executable):
    """The function for ``mapPartitions`` of the barrier RDD (pickled by Spark).

    Args:
      store_env: ``Store.env()`` of the driver's store (address and secret).
      settings: extra TFRING_* variables for every rank.
      executable: the Python of the rank processes (None: the executor's Python).
    """

    def task(_partition):
        from pyspark import BarrierTaskContext

        from tfring._runner import jobenv, rendezvous, spawn
        from tfring._runner.output import Output

        ctx = BarrierTaskContext.get()
        rank, attempt = ctx.partitionId(), ctx.attemptNumber()
        if attempt > 0:
            raise RuntimeError(f"tfring.spark.run: not starting rank {rank} again (task attempt {attempt + 1}): a "
                               "tfring job runs once; the driver reports the first attempt's error")
        hosts = [info.address.rsplit(":", 1)[0] for info in ctx.getTaskInfos()]
        identity = rendezvous.rank_identities(hosts)[rank]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TFRING_", "HOROVOD_"))}
        env.update(settings)
        env.update(identity)
        env.update(jobenv.horovod_identity(identity))
        env.update(store_env)
        env["TFRING_JOB_ID"] = f"spark-stage-{ctx.stageId()}"
        env.setdefault("PYTHONUNBUFFERED", "1")
        proc = spawn.LocalSpawner().spawn([executable or sys.executable, "-m", "tfring._runner.function_worker"],
                                          env)
        output = Output(stdout=sys.stdout, stderr=sys.stderr)
        output.attach(rank, "stdout", proc.stdout)
        output.attach(rank, "stderr", proc.stderr)
        try:
            while proc.poll() is None:
                time.sleep(POLL_S)
        finally:
            if proc.poll() is None:  # the task was interrupted (Spark kills failed stages' tasks)
                proc.kill()
                proc.wait()
            output.close(timeout=DRAIN_S)
        if proc.returncode != 0:
            raise RuntimeError(f"tfring.spark.run: rank {rank} exited with code {proc.returncode}; the driver "
                               "re-raises its Python exception when it reported one")
        yield rank

    return task
