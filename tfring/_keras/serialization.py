"""tfring's optimizer classes serialize exactly as the Keras classes they extend (a model
saved with ``DistributedOptimizer(Adam())`` records ``keras.optimizers.Adam``): the alias
each optimizer module registers at import. Below the optimizers and ``saving.py``
(``load_model``), which use it and each other. Thread-safety: runs at import.
"""


def register_serialization_alias(cls, base):
    """Makes instances of ``cls`` serialize exactly as instances of ``base`` (one-way: loading
    gives ``base``). Uses Keras' export and registration tables (pinned to Keras 3.15 by
    tests/test_strategy_private_api.py)."""
    from tfring import _private_api

    api_export = _private_api.keras_api_export
    object_registration = _private_api.keras_object_registration
    public_name = api_export.get_name_from_symbol(base)
    if public_name is not None:
        api_export.REGISTERED_OBJS_TO_NAMES[cls] = public_name
    elif base in object_registration.GLOBAL_CUSTOM_NAMES:
        object_registration.GLOBAL_CUSTOM_NAMES[cls] = object_registration.GLOBAL_CUSTOM_NAMES[base]
