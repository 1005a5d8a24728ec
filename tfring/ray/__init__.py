"""tfring on Ray: ``TfringTrainer`` for Ray Train (V2) and ``RayExecutor`` for plain actors.

    from tfring.ray import TfringTrainer
    from ray.train import ScalingConfig

    def train_fn(config):           # runs on every worker, tfring already initialized
        import tfring.keras as hvd
        ...                          # the same code as under tfringrun
    TfringTrainer(train_fn, scaling_config=ScalingConfig(num_workers=4)).fit()

Ray is imported only when one of these names is first used (``pip install tfring[ray]``).
Tested with Ray 2.60 (``SUPPORTED_RAY``): the backend API tfring builds on is Ray's
DeveloperAPI, so another release draws a warning. docs/engines.md has the whole story.
"""

SUPPORTED_RAY = ("2.60",)  # release series tested in CI (tests/test_ray.py)

__all__ = ["SUPPORTED_RAY", "RayExecutor", "TfringConfig", "TfringTrainer"]


def __getattr__(name):
    if name in ("TfringConfig", "TfringTrainer"):
        from tfring.ray import train

        return getattr(train, name)
    if name == "RayExecutor":
        from tfring.ray.executor import RayExecutor

        return RayExecutor
    raise AttributeError(f"module 'tfring.ray' has no attribute '{name}'")
