"""A single-process training script with only the strategy line changed, saving on every
rank (issue 13), plus the failure modes of coordinated saves. Run by
tests/test_strategy_checkpoints.py under tfringrun:

  checkpoint_script.py DIR repeat N     N rounds: fit + ModelCheckpoint, load_model on every
                                        rank, CheckpointManager (max_to_keep) + restore,
                                        save_weights, SavedModel, gated and per-rank saves
  checkpoint_script.py DIR backup KILL  fit with Keras BackupAndRestore; KILL > 0: rank 0
                                        SIGKILLs itself before renaming backup KILL into place
  checkpoint_script.py DIR fail         rank 0's disk is "full" (RLIMIT_FSIZE): every rank errors

Every rank prints "rank R: <what> OK" lines that the test looks for.
"""

import os
import signal
import sys

import numpy as np
import tensorflow as tf

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)

import keras

import tfring
from tfring._saving import atomic
from tfring.saving import local_save

out_dir, mode = sys.argv[1], sys.argv[2]
strategy = tfring.RingStrategy()  # the only line changed from the single-process script
rank, size = tfring.rank(), tfring.size()
rng = np.random.default_rng(0)
x = rng.normal(size=(64, 4)).astype("float32")
y = (x @ rng.normal(size=(4, 1))).astype("float32")


def make_model():
    with strategy.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)])
        model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    return model


def weights(model):
    return [np.array(w) for w in model.get_weights()]


def assert_equal(a, b, what):
    assert len(a) == len(b), what
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v, err_msg=what)


def ok(what):
    print(f"rank {rank}: {what} OK", flush=True)


renames = []  # files this rank moved into place (tfring.saving's test hook)


def one_round(i):
    atomic.before_rename = renames.append
    d = os.path.join(out_dir, f"round{i}")
    os.makedirs(d, exist_ok=True)
    keras.utils.set_random_seed(i)
    model = make_model()
    model.fit(x, y, batch_size=16, epochs=2, verbose=0,
              callbacks=[keras.callbacks.ModelCheckpoint(os.path.join(d, "ckpt-{epoch}.keras"))])
    trained = weights(model)
    reloaded = keras.models.load_model(os.path.join(d, "ckpt-2.keras"))  # right after the save
    assert_equal(weights(reloaded), trained, "load_model after ModelCheckpoint")

    ckpt = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
    manager = tf.train.CheckpointManager(ckpt, os.path.join(d, "tf"), max_to_keep=2)
    paths = [manager.save() for _ in range(3)]
    assert paths == [os.path.join(d, "tf", f"ckpt-{n}") for n in (1, 2, 3)], paths
    assert int(ckpt.save_counter.numpy()) == 3
    assert manager.checkpoints == paths[1:], manager.checkpoints
    assert tf.train.latest_checkpoint(os.path.join(d, "tf")) == paths[-1]
    assert not os.path.exists(paths[0] + ".index"), "max_to_keep deletion"
    fresh = make_model()
    with strategy.scope():
        fresh.optimizer.build(fresh.trainable_variables)
    tf.train.Checkpoint(model=fresh, optimizer=fresh.optimizer).restore(manager.latest_checkpoint).assert_consumed()
    assert_equal(weights(fresh), trained, "CheckpointManager restore")
    assert int(fresh.optimizer.iterations.numpy()) == int(model.optimizer.iterations.numpy())

    model.save_weights(os.path.join(d, "w.weights.h5"))
    other = make_model()
    with strategy.scope():
        other.optimizer.build(other.trainable_variables)
    other.load_weights(os.path.join(d, "w.weights.h5"))
    assert_equal(weights(other), trained, "save_weights / load_weights")

    leftovers = [f for f in os.listdir(d) + os.listdir(os.path.join(d, "tf")) if ".tmp-" in f]
    assert not leftovers, leftovers
    if rank == 0:  # 2 ModelCheckpoint files, 3 checkpoints, 1 weights file
        assert len(renames) == 6, renames
    else:
        assert not renames, f"rank {rank} wrote {renames}"
    renames.clear()
    atomic.before_rename = None
    ok(f"round {i}")


def extras(d):
    """Once per run: SavedModel, a rank-0-only save, per-rank paths, local_save."""
    os.makedirs(d, exist_ok=True)
    model = make_model()
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    trained = weights(model)
    module = tf.Module()
    module.v = tf.Variable(trained[0])
    tf.saved_model.save(module, os.path.join(d, "saved"))
    np.testing.assert_array_equal(tf.saved_model.load(os.path.join(d, "saved")).v.numpy(), trained[0])
    ok("saved_model")
    for _ in range(3):  # gated as docs/strategy.md used to advise: rank 0 must not wait for anyone
        if strategy.extended.should_checkpoint:
            model.save(os.path.join(d, "gated.keras"))
            tf.train.Checkpoint(model=model).write(os.path.join(d, "gated-ckpt"))
    tfring.barrier()
    assert_equal(weights(keras.models.load_model(os.path.join(d, "gated.keras"))), trained, "gated save")
    ok("rank-0-only save")
    for _ in range(2):  # Horovod style: every rank its own file, all written
        model.save(os.path.join(d, f"mine-{rank}.keras"))
        assert_equal(weights(keras.models.load_model(os.path.join(d, f"mine-{rank}.keras"))), trained, "own path")
    tfring.barrier()
    assert sorted(f for f in os.listdir(d) if f.startswith("mine-")) == [f"mine-{r}.keras" for r in range(size)]
    ok("per-rank paths")
    if rank == size - 1:
        with local_save():
            model.save(os.path.join(d, "last-rank-only.keras"))
        assert os.path.exists(os.path.join(d, "last-rank-only.keras"))
    ok("local_save")
    # mixing: gated saves first, then the same saves on every rank (per-path matching)
    if rank == 0:
        model.save(os.path.join(d, "mixed-a.keras"))
    model.save(os.path.join(d, "mixed-b.keras"))
    assert_equal(weights(keras.models.load_model(os.path.join(d, "mixed-b.keras"))), trained, "mixed")
    ok("gated then shared save")


def backup(kill_at):
    d = os.path.join(out_dir, "backup")
    log = []
    if rank == 0 and kill_at > 0:
        calls = []

        def kill(path):
            if path.endswith("latest.weights.h5"):
                calls.append(path)
                if len(calls) == kill_at:
                    print(f"rank 0: killing myself before renaming backup {kill_at}", flush=True)
                    os.kill(os.getpid(), signal.SIGKILL)

        atomic.before_rename = kill
    keras.utils.set_random_seed(0)
    model = make_model()

    class Record(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            log.append(epoch)

    model.fit(x, y, batch_size=16, epochs=5, verbose=0,
              callbacks=[keras.callbacks.BackupAndRestore(d, delete_checkpoint=False), Record()])
    print(f"rank {rank}: epochs run {log}", flush=True)
    print(f"rank {rank}: final iterations {int(model.optimizer.iterations.numpy())}", flush=True)
    print(f"rank {rank}: backup files {sorted(os.listdir(d))}", flush=True)
    ok("backup")


def fail():
    import resource

    d = os.path.join(out_dir, "full")
    os.makedirs(d, exist_ok=True)
    model = make_model()
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    for what, save in [("model.save", lambda: model.save(os.path.join(d, "big.keras"))),
                       ("CheckpointManager.save",
                        lambda: tf.train.CheckpointManager(tf.train.Checkpoint(model=model), os.path.join(d, "tf"),
                                                           max_to_keep=1).save())]:
        if rank == 0:  # a full disk on the writer: files cannot grow past 1 KiB
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (1024, limits[1]))
        try:
            save()
        except Exception as e:  # noqa: BLE001 - the test checks the type and message below
            text = " ".join([f"{type(e).__module__}.{type(e).__name__}: {e}", *getattr(e, "__notes__", [])])
            print(f"rank {rank}: {what} failed: " + text.replace("\n", " | "), flush=True)
        else:
            raise AssertionError(f"rank {rank}: {what} did not fail")
        finally:
            if rank == 0:
                resource.setrlimit(resource.RLIMIT_FSIZE, limits)
    assert not os.path.exists(os.path.join(d, "big.keras"))
    ok("full disk")


if mode == "repeat":
    for i in range(int(sys.argv[3])):
        one_round(i)
    extras(os.path.join(out_dir, "extras"))
elif mode == "backup":
    backup(int(sys.argv[3]))
elif mode == "fail":
    fail()
