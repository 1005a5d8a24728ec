"""Functions the Ray tests (tests/test_ray.py) run on Ray workers, importable there through
PYTHONPATH. ``keras_digits`` also runs under tfringrun, so the two can be compared:

    tfringrun -np 2 python tests/workers/ray_fns.py OUT_DIR
"""

import json
import os
import sys
import time


def _one_thread():
    import tensorflow as tf

    try:
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    except RuntimeError:  # TF already started in this process
        pass


def _ray_identity():
    """Ray Train's view of this worker, or {} outside Ray Train."""
    try:
        import ray.train

        context = ray.train.get_context()
        return {"ray_world_rank": context.get_world_rank(), "ray_world_size": context.get_world_size(),
                "ray_local_rank": context.get_local_rank(), "node_id": ray.get_runtime_context().get_node_id()}
    except Exception:  # noqa: BLE001 - not inside Ray Train
        return {}


def keras_digits(config):
    """A Keras 3 fit with DistributedOptimizer on 512 digits; writes rank R's result to
    config["out_dir"]/rank.R.json."""
    _one_thread()
    import keras
    from sklearn.datasets import load_digits

    import tfring.keras as hvd

    hvd.init()  # a no-op under TfringTrainer, which initialized tfring already
    digits = load_digits()
    x, y = (digits.data / 16.0).astype("float32")[:512], digits.target[:512]
    x, y = x[hvd.rank()::hvd.size()], y[hvd.rank()::hvd.size()]
    keras.utils.set_random_seed(7 + hvd.rank())  # different on each rank: the broadcast must align them
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(10)])
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(x, y, batch_size=32, epochs=3, shuffle=False, verbose=0,
                        callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])
    result = {"rank": hvd.rank(), "size": hvd.size(), "local_rank": hvd.local_rank(), "local_size": hvd.local_size(),
              "loss": history.history["loss"], "weights": [w.tolist() for w in model.get_weights()],
              **_ray_identity()}
    with open(os.path.join(config["out_dir"], f"rank.{hvd.rank()}.json"), "w") as f:
        json.dump(result, f)
    return result["loss"][-1]


def raise_on_rank_1(config):
    """Rank 1 raises after a first allreduce (writing when); rank 0 then waits in a second
    one, which must fail naming rank 1. Rank 0 writes its error to config["rank0_error"]:
    Ray's report of a failed fit lists the errors of the workers it had seen fail when it
    stopped the group, which may be rank 1's alone."""
    import numpy as np

    import tfring

    tfring.allreduce(np.ones(2, np.float32), name="first")
    if tfring.rank() == 1:
        with open(config["raised_at"], "w") as f:
            f.write(repr(time.time()))
        raise ValueError("boom on purpose")
    try:
        tfring.allreduce(np.ones(2, np.float32), name="never_matched")
    except Exception as e:
        with open(config["rank0_error"] + ".tmp", "w") as f:
            f.write(f"{type(e).__name__}: {e}")
        os.replace(config["rank0_error"] + ".tmp", config["rank0_error"])  # whole, or not there yet
        raise


def fail_first_attempt(config):
    """Rank 1 fails the first attempt only (a marker file remembers it); every rank of the
    attempt that succeeds writes ok.R."""
    import numpy as np

    import tfring

    total = tfring.allreduce(np.ones(2, np.float32), name="step", op=tfring.Sum)
    if tfring.rank() == 1 and not os.path.exists(config["marker"]):
        open(config["marker"], "w").close()
        raise RuntimeError("first attempt fails")
    tfring.allreduce(np.ones(2, np.float32), name="after")
    with open(os.path.join(config["out_dir"], f"ok.{tfring.rank()}"), "w") as f:
        f.write(str(total.tolist()))


def executor_allreduce(scale):
    """For RayExecutor.run: init as a Horovod script would, sum (rank + 1) * scale."""
    import numpy as np

    import tfring

    tfring.init()
    total = tfring.allreduce(np.array([(tfring.rank() + 1) * scale], np.float64), name="sum", op=tfring.Sum)
    return {"rank": tfring.rank(), "size": tfring.size(), "sum": float(total[0])}


def executor_raise(_):
    import numpy as np

    import tfring

    tfring.init()
    if tfring.rank() == 0:
        raise KeyError("no such shard")
    tfring.allreduce(np.ones(1, np.float32), name="never_matched")


if __name__ == "__main__":
    keras_digits({"out_dir": sys.argv[1]})
