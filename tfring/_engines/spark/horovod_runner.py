"""``TfringRunner``: the shape of Databricks' ``HorovodRunner`` (``sparkdl.HorovodRunner``)
on ``tfring.spark.run`` and ``tfring.run``.

    from tfring.spark import TfringRunner
    TfringRunner(np=2).run(main, epochs=3)     # 2 ranks as Spark barrier tasks
    TfringRunner(np=-2).run(main, epochs=3)    # 2 ranks on the driver (tfring.run)

Blocking; returns rank 0's return value, as HorovodRunner does.
"""


class TfringRunner:
    """Args:
      np: ranks; > 0 runs them as Spark barrier tasks, < 0 runs -np ranks on this machine
        (HorovodRunner's local mode, for debugging).
    """

    def __init__(self, np, driver_log_verbosity="all"):
        if not isinstance(np, int) or np == 0:
            raise ValueError(f"TfringRunner needs np > 0 (Spark tasks) or np < 0 (local processes). Received: {np!r}")
        self.num_processor = np
        self.driver_log_verbosity = driver_log_verbosity

    def run(self, main, **kwargs):
        """Runs ``main(**kwargs)`` on every rank; returns rank 0's result."""
        if self.num_processor < 0:
            from tfring._runner.python_launch import run

            return run(main, kwargs=kwargs, np=-self.num_processor)[0]
        from tfring._engines.spark.driver import run

        return run(main, kwargs=kwargs, num_proc=self.num_processor,
                   verbose=0 if self.driver_log_verbosity == "log_callback_only" else 1)[0]
