"""Start-up cost of the Python launchers (docs/launcher.md, docs/engines.md):

  tfring.run(trivial fn, np=2)           vs  tfringrun -np 2 python trivial.py
  tfring.spark.run(trivial fn, num_proc=2) vs  the bare Spark barrier stage (2 tasks)

    python benchmarks/launch_startup.py [--runs 5] [--spark] [--json out.json]

Each figure is the wall time of one call from the caller, repeated ``--runs`` times after
one warm-up (reported apart: Spark starts its Python workers then); medians and ranges.
The trivial function returns its rank; it imports no TensorFlow. Spark runs on
``local-cluster[2,1,1024]`` (needs Java 17 and pyspark).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def _trivial():
    import os

    return int(os.environ["TFRING_RANK"])


def _timed(fn, runs):
    first = time.perf_counter()
    fn()
    first = time.perf_counter() - first
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return {"first_s": round(first, 3), "median_s": round(statistics.median(times), 3),
            "min_s": round(min(times), 3), "max_s": round(max(times), 3), "runs": len(times)}


def launcher(runs):
    import tfring

    script = os.path.join(tempfile.mkdtemp(), "trivial.py")
    with open(script, "w") as f:
        f.write("import os\nprint(int(os.environ['TFRING_RANK']))\n")
    tfringrun = os.path.join(os.path.dirname(sys.executable), "tfringrun")

    def by_tfringrun():
        subprocess.run([tfringrun, "-np", "2", sys.executable, script], check=True, capture_output=True, timeout=60)

    def by_run():
        assert tfring.run(_trivial, np=2) == [0, 1]

    return {"tfringrun -np 2 python trivial.py": _timed(by_tfringrun, runs),
            "tfring.run(trivial, np=2)": _timed(by_run, runs)}


def spark(runs):
    from pyspark import BarrierTaskContext
    from pyspark.sql import SparkSession

    import tfring.spark

    os.environ["PYSPARK_PYTHON"] = sys.executable
    t = time.perf_counter()
    session = (SparkSession.builder.master("local-cluster[2,1,1024]").appName("launch-startup")
               .config("spark.ui.enabled", "false").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    sc = session.sparkContext
    tfring._engines.spark.driver._wait_for_slots(sc, 2, 120)
    started = time.perf_counter() - t

    def bare():
        def task(_):
            yield BarrierTaskContext.get().partitionId()

        assert sc.parallelize(range(2), 2).barrier().mapPartitions(task).collect() == [0, 1]

    def by_tfring():
        assert tfring.spark.run(_trivial, num_proc=2, verbose=0) == [0, 1]

    try:
        out = {"bare barrier stage (2 tasks)": _timed(bare, runs),
               "tfring.spark.run(trivial, num_proc=2)": _timed(by_tfring, runs)}
    finally:
        session.stop()
    out["SparkSession start + 2 executors (once)"] = {"first_s": round(started, 3)}
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--spark", action="store_true", help="also time the Spark pair")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args()
    results = launcher(args.runs)
    if args.spark:
        results.update(spark(args.runs))
    for name, r in results.items():
        print(f"{name:45s} {json.dumps(r)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
