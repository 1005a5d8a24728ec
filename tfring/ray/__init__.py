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

from tfring._api.binding import bind as _bind

__getattr__, __dir__ = _bind(globals())  # the names of tfring.ray in tfring/_api/exports.py
