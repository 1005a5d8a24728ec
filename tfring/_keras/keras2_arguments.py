"""Keras-2-only keyword arguments that reach tfring's ``compile`` and ``fit`` hooks.

Horovod-era scripts pass arguments Keras 3 removed. Keras 3 would fail with
``TypeError: ... unexpected keyword argument`` raised at the hook's call line, which makes
tfring look like the cause. Instead, inside the hooks (once tfring's Keras integration is in
use, see jit.py and progress.py):

* arguments that only tuned how Keras 2 ran (``experimental_run_tf_function``, and the
  data-loading ``workers`` / ``use_multiprocessing`` / ``max_queue_size``) are dropped with a
  ``UserWarning`` naming the argument and its Keras 3 replacement, pointing at the user's
  line: dropping them does not change what is trained;
* arguments whose meaning Keras 3 moved elsewhere raise ``TypeError`` naming the
  replacement;
* any other unknown keyword raises the ``TypeError`` Python would, naming Keras' method and
  its parameters.

Errors Keras raises from inside ``compile``/``fit`` are not touched: their tracebacks end in
Keras' frames. Stateless; thread-safe.
"""

import inspect
import warnings

DROPPED = {
    "compile": {
        "experimental_run_tf_function": "Keras 3 always runs train_step in a tf.function (run_eagerly=True turns "
                                        "that off)",
    },
    "fit": {
        "workers": "pass workers= to your keras.utils.PyDataset",
        "use_multiprocessing": "pass use_multiprocessing= to your keras.utils.PyDataset",
        "max_queue_size": "pass max_queue_size= to your keras.utils.PyDataset",
    },
}

REJECTED = {
    "compile": {
        "distribute": "build and compile the model under tfring.RingStrategy().scope() instead",
        "target_tensors": "pass the targets to fit(y=...)",
        "sample_weight_mode": "pass sample_weight= to fit(); Keras 3 infers its shape",
    },
    "fit": {},
}


def clean(method, original, kwargs, stacklevel):
    """``kwargs`` for Keras 3's ``original`` (``Model.compile`` or ``Model.fit``), without
    the dropped Keras 2 arguments. ``stacklevel`` is the warning's, counted from the hook
    that calls this (so the warning names the user's line). Raises ``TypeError`` as the
    module doc says."""
    parameters = inspect.signature(original).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return kwargs
    out = dict(kwargs)
    for name in kwargs:
        if name in parameters:
            continue
        if name in DROPPED.get(method, {}):
            warnings.warn(f"model.{method}({name}=...) is a Keras 2 argument that Keras 3 removed; tfring ignores "
                          f"it ({DROPPED[method][name]}). Remove it (tfring-migrate does that, docs/migrating.md).",
                          UserWarning, stacklevel=stacklevel + 1)
            del out[name]
        elif name in REJECTED.get(method, {}):
            raise TypeError(f"model.{method}({name}=...) is a Keras 2 argument that Keras 3 removed: "
                            f"{REJECTED[method][name]} (docs/migrating.md)")
        else:
            accepted = ", ".join(p for p in parameters if p != "self")
            raise TypeError(f"keras Model.{method}() got an unexpected keyword argument '{name}' "
                            f"(it takes {accepted})")
    return out
