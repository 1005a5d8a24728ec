"""tfring on Ray, the implementation of ``tfring.ray`` (private): ``train`` (TfringTrainer,
Ray Train's backend), ``executor`` (RayExecutor on plain actors), ``job`` (what both share).
"""

SUPPORTED_RAY = ("2.60",)  # release series tested in CI (tests/test_ray.py); public as tfring.ray.SUPPORTED_RAY
