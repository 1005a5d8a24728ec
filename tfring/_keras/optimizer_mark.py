"""Whether an optimizer is one of tfring's: the mark ``DistributedOptimizer`` classes carry
(``_tfring_distributed``). Its own module, below everything that asks (the optimizers,
``model_preparation``, ``step_agreement``, ``saving``), so that none of them imports another
to ask. No imports; thread-safe.
"""


def is_distributed(optimizer):
    """True for an optimizer wrapped by ``DistributedOptimizer`` (or tfring's
    ``LossScaleOptimizer`` around one); False for None."""
    if getattr(optimizer, "_tfring_distributed", False):
        return True
    return bool(getattr(getattr(optimizer, "inner_optimizer", None), "_tfring_distributed", False))
