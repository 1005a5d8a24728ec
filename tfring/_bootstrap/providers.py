"""The functions of higher layers that a lower layer calls at run time, in one table.

Imports run one way (tests/test_python_layers.py): a module imports only its own layer
and those below. Four calls cannot follow that rule, because the lower layer is the
public entry point and the work belongs to a higher one; each is named here with its
reason, and its module is imported when it is first needed (not with the caller):

  elastic_join        ``tfring.init()`` in a process started by the elastic driver joins
                      the driver's next generation first (tfring._elastic.worker)
  elastic_launch      ``tfringrun`` with an elastic flag (``--min-np``, ``--max-np``,
                      ``--host-discovery-script``) hands the job to the elastic driver, the
                      layer above the launcher that it uses (tfring._elastic.launch)
  keras_optimizer     ``tfring.tensorflow.DistributedOptimizer`` given a Keras optimizer
                      returns tfring.keras's wrapper, as horovod.tensorflow does
  horovod_rules       the HOROVOD_* settings tfring ignores and the advice for each,
                      warned about at ``init()``: tfring-migrate's tables (the module)

Contract: ``get(name)`` returns the object, or the module where the table names no
attribute (importing its module on first use; Python's
import lock makes that thread-safe); an unknown name raises ``KeyError``. No other module
imports tfring modules by a computed name (the layering test checks that too).
"""

import importlib

PROVIDERS = {
    "elastic_join": ("tfring._elastic.worker", "init_core"),
    "elastic_launch": ("tfring._elastic.launch", "launch_elastic"),
    "keras_optimizer": ("tfring._keras.distributed_optimizer", "DistributedOptimizer"),
    "horovod_rules": ("tfring._migrate.rules", None),
}


def get(name):
    module, attribute = PROVIDERS[name]
    found = importlib.import_module(module)
    return found if attribute is None else getattr(found, attribute)
