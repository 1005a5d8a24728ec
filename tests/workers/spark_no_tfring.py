"""A Spark driver whose executors' Python cannot import tfring: tests/test_spark.py runs it
with PYSPARK_PYTHON set to a bare virtual environment's Python (no tfring, no PYTHONPATH:
this script puts the repository on its own sys.path only). It calls tfring.spark.run on a
one-executor ``local-cluster`` and prints the RuntimeError's message between markers;
with an argument, it also writes the stage's Spark error text (py4j's) to that file."""

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def main():
    from pyspark.sql import SparkSession

    import tfring.spark

    spark = (SparkSession.builder.master("local-cluster[1,1,1024]").appName("tfring-test-no-tfring")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.extraJavaOptions", JVM_OPTIONS)
             .config("spark.executor.extraJavaOptions", JVM_OPTIONS).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        tfring.spark.run(int, num_proc=1, verbose=0)
    except RuntimeError as e:
        print(f"<message>\n{e}\n</message>", flush=True)
        if len(sys.argv) > 1:
            with open(sys.argv[1], "w") as f:
                f.write(str(e.__cause__))
    else:
        print("tfring.spark.run did not fail", flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
