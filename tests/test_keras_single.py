"""tfring.keras in one process (size 1): API, optimizer wrapping and serialization,
atomic checkpoints, rank-0-only writers, jit_compile left as set (XLA-compiled steps). The 2-process behaviour is
in test_keras_multiprocess.py."""

import json
import os
import warnings

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")
pytest.importorskip("tfring.tensorflow", reason="the TF op library (tfring.tensorflow) is not built")

import tfring
import tfring.keras as hvd
from tests.helpers import one_tf_thread_each
from tfring._api import exports
from tfring._keras import model_preparation
from tfring._keras.callbacks import checkpoint


@pytest.fixture(scope="module", autouse=True)
def single_process():
    one_tf_thread_each()
    hvd.init()
    yield
    tfring.shutdown()


def small_model(optimizer=None, **compile_kwargs):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="relu"), keras.layers.Dense(1)])
    # Created before `model.compile` is looked up: the first DistributedOptimizer installs the hook.
    optimizer = optimizer or hvd.DistributedOptimizer(keras.optimizers.Adam(0.01))
    model.compile(optimizer=optimizer, loss="mse", **compile_kwargs)
    return model


def data(n=32):
    x = np.random.RandomState(0).rand(n, 3).astype("float32")
    return x, x.sum(axis=1, keepdims=True)


def test_public_api():
    # The one list of names: tfring/_api/exports.py (tests/test_public_api.py checks each package).
    assert sorted(hvd.__all__) == exports.public_names("tfring.keras")
    assert sorted(hvd.callbacks.__all__) == exports.public_names("tfring.keras.callbacks")
    assert (hvd.rank(), hvd.size(), hvd.verbose(), hvd.verbose(2)) == (0, 1, 1, 2)
    assert hvd.verbose(root_rank=1) == 0


def test_value_collectives_return_tensors_as_horovod_keras():
    # horovod.tensorflow.keras returns the op's tf.Tensor when eager (issue 28 item 4: tfring
    # returned NumPy, so .numpy() and tf.test.TestCase.evaluate failed).
    case = tf.test.TestCase()
    got = hvd.allreduce(np.float32(3.0))
    assert isinstance(got, tf.Tensor) and got.dtype == tf.float32 and got.shape == ()
    assert got.numpy() == 3.0 and case.evaluate(got) == 3.0
    for value, dtype in ((2.5, tf.float32), (7, tf.int32), ([1.0, 2.0], tf.float32),
                         (np.arange(3.0), tf.float64), (tf.constant([1, 2], tf.int64), tf.int64)):
        out = hvd.allreduce(value)
        assert isinstance(out, tf.Tensor) and out.dtype == dtype, (value, out)
        assert np.array_equal(case.evaluate(out), np.asarray(value)), (value, out)
    assert hvd.allreduce([2.0, 4.0], average=False).numpy().tolist() == [2.0, 4.0]
    assert hvd.allreduce([2.0], op=hvd.Sum, prescale_factor=2.0, postscale_factor=3.0).numpy().tolist() == [12.0]
    with pytest.raises(ValueError, match="op parameter supersedes average"):
        hvd.allreduce([1.0], average=True, op=hvd.Sum)
    gathered = hvd.allgather(np.arange(6).reshape(3, 2), name="gather")
    assert isinstance(gathered, tf.Tensor) and gathered.dtype == tf.int64 and gathered.shape == (3, 2)
    assert np.array_equal(gathered.numpy(), np.arange(6).reshape(3, 2))
    sent = hvd.broadcast(np.arange(3, dtype=np.float16), 0)
    assert isinstance(sent, tf.Tensor) and sent.dtype == tf.float16
    assert np.array_equal(case.evaluate(sent), np.arange(3))
    share = hvd.reducescatter(np.ones((3, 2), np.float32), op=hvd.Sum)
    assert isinstance(share, tf.Tensor) and share.shape == (3, 2) and case.evaluate(share).sum() == 6

    @tf.function
    def in_graph(x):
        out = (hvd.allreduce(x, name="fn.allreduce"), hvd.allgather(x, name="fn.allgather"),
               hvd.broadcast(x, 0, name="fn.broadcast"), hvd.reducescatter(x, name="fn.reducescatter"))
        assert all(isinstance(t, tf.Tensor) and not hasattr(t, "numpy") for t in out)  # symbolic while tracing
        return out

    for out in in_graph(tf.constant([[1.0, 2.0]])):
        assert np.array_equal(out.numpy(), [[1.0, 2.0]])


def test_broadcast_global_variables_and_timeline_are_in_the_keras_module(tmp_path):
    # Horovod's horovod.tensorflow.keras has them (issue 28 item 5); eagerly, Horovod's
    # broadcast_global_variables raises RuntimeError pointing at broadcast_variables.
    with pytest.raises(RuntimeError, match="broadcast_variables"):
        hvd.broadcast_global_variables(0)
    path = tmp_path / "timeline.json"
    hvd.start_timeline(str(path))
    hvd.allreduce([1.0], name="timeline.allreduce")
    hvd.stop_timeline()
    assert "timeline.allreduce" in path.read_text()
    with pytest.warns(UserWarning, match="no cycle markers"):
        hvd.start_timeline(str(tmp_path / "cycles.json"), mark_cycles=True)
    hvd.stop_timeline()
    assert json.loads((tmp_path / "cycles.json").read_text()) is not None


def test_process_sets_follow_horovod_on_one_rank():
    # issue 28 item 5: the global set lists every rank; duplicates are refused; removing the
    # global set (or a set never added) returns False instead of raising.
    assert hvd.global_process_set.ranks == [0] and hvd.global_process_set.size() == 1
    with pytest.raises(ValueError, match="duplicate process set: ranks \\[0\\] are already process set id 0"):
        hvd.add_process_set([0])
    with pytest.raises(ValueError, match="duplicate"):
        hvd.add_process_set(hvd.ProcessSet([0]))
    assert hvd.remove_process_set(hvd.global_process_set) is False
    assert hvd.remove_process_set(hvd.ProcessSet([0])) is False
    assert hvd.global_process_set.process_set_id == 0 and hvd.global_process_set.ranks == [0]


TF1_GRAPH = """
import numpy as np, tensorflow as tf
tf.compat.v1.disable_eager_execution()
import tfring.keras as hvd
hvd.init()
got = hvd.allreduce(np.arange(3.0), op=hvd.Sum)          # no default session: a session of its own
assert isinstance(got, np.ndarray) and got.tolist() == [0.0, 1.0, 2.0], got
try:
    hvd.broadcast_global_variables(0)
    raise SystemExit("broadcast_global_variables ran without a session")
except RuntimeError as e:
    assert "as_default" in str(e), e
v = tf.compat.v1.get_variable("v", initializer=tf.constant([1.0, 2.0]))
with tf.compat.v1.Session() as session:                    # the default session inside the block
    session.run(tf.compat.v1.global_variables_initializer())
    assert hvd.broadcast_global_variables(0) is None       # session.run of the group op, as Horovod
    assert hvd.allgather([[5]]).tolist() == [[5]]
    assert session.run(v).tolist() == [1.0, 2.0]
print("TF1-OK", flush=True)
"""


@pytest.mark.timeout(120)
def test_value_collectives_run_in_the_session_in_a_tf1_graph():
    from tests.helpers import run_job

    result = run_job(1, TF1_GRAPH, timeout=100)
    assert "TF1-OK" in result.stdout, result.stdout + result.stderr


def test_distributed_optimizer_keeps_class_name_config_and_save_format():
    from keras.src.saving import serialization_lib

    base = keras.optimizers.Adam(0.003, beta_1=0.8, clipnorm=1.0, name="my_adam")
    opt = hvd.DistributedOptimizer(base)
    assert opt is not base and not hvd.is_distributed(base) and hvd.is_distributed(opt)
    assert isinstance(opt, keras.optimizers.Adam) and type(opt).__name__ == "Adam"
    assert opt.name == "my_adam" and opt.get_config() == base.get_config()
    assert serialization_lib.serialize_keras_object(opt) == serialization_lib.serialize_keras_object(base)
    assert type(hvd.DistributedOptimizer(keras.optimizers.Adam())) is type(opt)  # one class per base
    assert isinstance(hvd.DistributedOptimizer("sgd"), keras.optimizers.SGD)


def test_registered_custom_optimizer_round_trips(tmp_path):
    @keras.saving.register_keras_serializable(package="tfring_test")
    class HalfSGD(keras.optimizers.SGD):
        pass

    model = small_model(hvd.DistributedOptimizer(HalfSGD(0.1)))
    model.fit(*data(), epochs=1, verbose=0)
    path = str(tmp_path / "m.keras")
    model.save(path)
    plain = keras.models.load_model(path)
    assert type(plain.optimizer) is HalfSGD
    loaded = hvd.load_model(path)
    assert isinstance(loaded.optimizer, HalfSGD) and hvd.is_distributed(loaded.optimizer)
    assert int(loaded.optimizer.iterations) == 1


def test_load_model_keeps_jit_compile(tmp_path):
    path = str(tmp_path / "xla.keras")
    small_model(keras.optimizers.SGD(0.1), jit_compile=True).save(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = hvd.load_model(path)
    assert loaded.jit_compile is True and hvd.is_distributed(loaded.optimizer)
    assert not [w for w in caught if "jit_compile" in str(w.message)]


def test_built_optimizer_state_is_carried_over():
    model = small_model(keras.optimizers.Adam(0.01))
    model.fit(*data(), epochs=2, verbose=0)
    opt = hvd.DistributedOptimizer(model.optimizer)
    assert opt.built and int(opt.iterations) == int(model.optimizer.iterations) == 2
    for a, b in zip(opt.variables, model.optimizer.variables):
        assert np.array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"op": hvd.Min}, "op must be"),
        ({"op": hvd.Sum, "gradient_predivide_factor": 2.0}, "only supported with op=Average"),
        ({"gradient_predivide_factor": 0.0}, "must be > 0"),
        ({"backward_passes_per_step": 0}, "backward_passes_per_step must be an integer >= 1"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        hvd.DistributedOptimizer(keras.optimizers.SGD(), **kwargs)


def test_not_an_optimizer_or_already_distributed():
    with pytest.raises(TypeError, match="Keras 3 optimizer"):
        hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1))
    with pytest.raises(ValueError, match="already"):
        hvd.DistributedOptimizer(hvd.DistributedOptimizer(keras.optimizers.SGD()))


def test_loss_scale_optimizer_wrapping():
    keras_lso = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1), initial_scale=128.0, name="lso")
    opt = hvd.DistributedOptimizer(keras_lso)
    assert type(opt) is hvd.LossScaleOptimizer and opt.name == "lso" and opt.initial_scale == 128.0
    assert hvd.is_distributed(opt.inner_optimizer)
    from keras.src.saving import serialization_lib

    config = serialization_lib.serialize_keras_object(opt)
    assert (config["module"], config["class_name"]) == ("keras.optimizers", "LossScaleOptimizer")
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        auto = hvd.DistributedOptimizer(keras.optimizers.SGD(0.1))
        assert type(auto) is hvd.LossScaleOptimizer and hvd.is_distributed(auto.inner_optimizer)
        model = small_model(auto)
        assert model.optimizer is auto
        model.fit(*data(), epochs=1, verbose=0)
    finally:
        keras.mixed_precision.set_global_policy("float32")


def test_jit_compile_auto_resolves_as_in_plain_keras(monkeypatch):
    from keras.src.trainers import trainer

    monkeypatch.setattr(trainer.Trainer, "_resolve_auto_jit_compile", lambda self: True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = small_model()  # jit_compile="auto" -> True on a "GPU"
        other = small_model(jit_compile=True)
    assert model.jit_compile is True and other.jit_compile is True
    assert not [w for w in caught if "jit_compile" in str(w.message)]


def test_jit_compile_stays_on_where_tf_sees_a_gpu_with_the_xla_cuda_handlers(monkeypatch):
    from keras.src.trainers import trainer

    from tfring._tensorflow import xla

    monkeypatch.setattr(trainer.Trainer, "_resolve_auto_jit_compile", lambda self: True)
    monkeypatch.setattr(xla, "_tf_sees_gpu", lambda: True)
    monkeypatch.setattr(xla, "cuda_handler_status", lambda: "")  # the GPU library registered them
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = small_model()
        other = small_model(jit_compile=True)
    assert model.jit_compile is True and other.jit_compile is True
    assert not [w for w in caught if "jit_compile" in str(w.message)]


def test_jit_compile_is_turned_off_once_where_tf_sees_a_gpu_without_the_handlers(monkeypatch):
    from keras.src.trainers import trainer

    from tfring._tensorflow import xla

    monkeypatch.setattr(trainer.Trainer, "_resolve_auto_jit_compile", lambda self: True)
    monkeypatch.setattr(xla, "lowered_here", lambda: False)  # a GPU without tfring's XLA CUDA handlers
    monkeypatch.setattr(xla, "cuda_handler_status", lambda: "tfring was built without its GPU library")
    monkeypatch.setattr(model_preparation, "_warned", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = small_model()
        other = small_model(jit_compile=True)
        plain = small_model(keras.optimizers.SGD(), jit_compile=True)
    assert model.jit_compile is False and other.jit_compile is False
    assert plain.jit_compile is True  # not a tfring optimizer: left alone
    off = [str(w.message) for w in caught if "turning jit_compile off" in str(w.message)]
    assert len(off) == 1 and "built without its GPU library" in off[0]


def test_fit_with_callbacks_stays_compiled():
    model = small_model(hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)), jit_compile=True)
    before = [w.numpy() for w in model.weights]
    model.fit(*data(), epochs=1, verbose=0, callbacks=[hvd.callbacks.MetricAverageCallback()])
    assert model.jit_compile is True
    assert any(not np.array_equal(a, w.numpy()) for a, w in zip(before, model.weights))


def test_custom_loop_compiles_with_xla():
    var = keras.Variable(np.zeros(2, np.float32))
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(1.0))
    opt.build([var])

    @tf.function(jit_compile=True)
    def step():
        opt.apply([tf.ones(2)], [var])

    step()
    np.testing.assert_allclose(var.numpy(), [-1.0, -1.0])  # size 1: the average is the gradient


def test_writers_do_nothing_on_other_ranks(tmp_path):
    model = small_model()
    model.fit(
        *data(), epochs=1, verbose=0,
        callbacks=[
            hvd.callbacks.ModelCheckpoint(str(tmp_path / "c.keras"), root_rank=1),
            hvd.callbacks.TensorBoard(str(tmp_path / "tb"), root_rank=1),
            hvd.callbacks.BackupAndRestore(str(tmp_path / "backup"), root_rank=1, delete_checkpoint=False),
        ],
    )
    assert os.listdir(tmp_path) == []


def test_model_checkpoint_interrupted_write_keeps_previous(tmp_path, monkeypatch):
    path = str(tmp_path / "c.keras")
    model = small_model()
    model.fit(*data(), epochs=1, verbose=0, callbacks=[hvd.callbacks.ModelCheckpoint(path)])
    good = keras.models.load_model(path).get_weights()
    original_save = keras.Model.save

    def save_then_die(self, filepath, *args, **kwargs):
        with open(filepath, "wb") as f:
            f.write(b"PK\x03\x04 truncated")
        raise KeyboardInterrupt("killed while saving")

    monkeypatch.setattr(keras.Model, "save", save_then_die)
    with pytest.raises(KeyboardInterrupt):
        model.fit(*data(), epochs=1, verbose=0, callbacks=[hvd.callbacks.ModelCheckpoint(path)])
    monkeypatch.setattr(keras.Model, "save", original_save)
    assert os.listdir(tmp_path) == ["c.keras"]
    for a, b in zip(keras.models.load_model(path).get_weights(), good):
        assert np.array_equal(a, b)


def test_model_checkpoint_weights_only_and_best_only(tmp_path):
    path = str(tmp_path / "w-{epoch}.weights.h5")
    model = small_model()
    model.fit(*data(), epochs=2, verbose=0,
              callbacks=[hvd.callbacks.ModelCheckpoint(path, save_weights_only=True, save_best_only=True,
                                                       monitor="loss")])
    assert sorted(os.listdir(tmp_path)) == ["w-1.weights.h5", "w-2.weights.h5"]
    model.load_weights(str(tmp_path / "w-2.weights.h5"))


def test_backup_interrupted_between_files_resumes_from_previous(tmp_path, monkeypatch):
    backup = str(tmp_path / "backup")
    model = small_model()
    model.fit(*data(), epochs=1, verbose=0,
              callbacks=[hvd.callbacks.BackupAndRestore(backup, delete_checkpoint=False)])
    weights_after_1 = model.get_weights()
    real_atomic_write = checkpoint.atomic_write

    def die_on_metadata(filepath, write):
        if filepath.endswith(".json"):
            raise KeyboardInterrupt("killed between the weights and the metadata")
        return real_atomic_write(filepath, write)

    monkeypatch.setattr(checkpoint, "atomic_write", die_on_metadata)
    with pytest.raises(KeyboardInterrupt):
        model.fit(*data(), epochs=3, verbose=0,
                  callbacks=[hvd.callbacks.BackupAndRestore(backup, delete_checkpoint=False)])
    monkeypatch.undo()
    with open(os.path.join(backup, "training_metadata.json")) as f:
        assert json.load(f) == {"epoch": 1, "batch": 0, "weights": "backup-1.weights.h5", "sequence": 1}

    class Epochs(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.seen = []

        def on_epoch_begin(self, epoch, logs=None):
            self.seen.append(epoch)

        def on_train_begin(self, logs=None):
            self.begin = self.model.get_weights()

    fresh = small_model()
    rec = Epochs()
    fresh.fit(*data(), epochs=3, verbose=0, callbacks=[hvd.callbacks.BackupAndRestore(backup), rec])
    assert rec.seen == [1, 2]
    for a, b in zip(rec.begin, weights_after_1):
        assert np.array_equal(a, b)
    assert not os.path.exists(backup)


def test_learning_rate_callbacks_need_a_float_learning_rate():
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, 10, 0.9)
    model = small_model(hvd.DistributedOptimizer(keras.optimizers.SGD(schedule)))
    with pytest.raises(TypeError, match="float learning rate"):
        model.fit(*data(), epochs=1, verbose=0,
                  callbacks=[hvd.callbacks.LearningRateScheduleCallback(0.1, 0.5)])
    with pytest.raises(ValueError, match="initial_lr"):
        hvd.callbacks.LearningRateWarmupCallback(None)


def test_metric_average_is_identity_on_one_rank():
    logs = {"loss": 1.5, "val_accuracy": np.float32(0.25), "note": "text"}
    hvd.callbacks.MetricAverageCallback().on_epoch_end(0, logs)
    assert logs == {"loss": 1.5, "val_accuracy": np.float32(0.25), "note": "text"}


# ---- Keras 2 arguments that reach tfring's hooks (docs/migrating.md) ---------------------

def test_keras2_tuning_arguments_are_dropped_with_a_warning_at_the_users_line():
    x, y = data()
    with pytest.warns(UserWarning, match=r"compile\(experimental_run_tf_function=\.\.\.\).*Keras 3 removed") as caught:
        model = small_model(experimental_run_tf_function=False)
    # small_model's compile line, not a tfring frame, is where the warning points.
    assert [os.path.basename(w.filename) for w in caught if "experimental_run" in str(w.message)] == [
        "test_keras_single.py"]
    with pytest.warns(UserWarning, match=r"fit\(workers=\.\.\.\).*keras\.utils\.PyDataset") as caught:
        history = model.fit(x, y, epochs=2, verbose=0, workers=4, use_multiprocessing=False)
    assert {os.path.basename(w.filename) for w in caught if "PyDataset" in str(w.message)} == {"test_keras_single.py"}
    assert len(history.history["loss"]) == 2


@pytest.mark.parametrize("kwargs, match", [
    ({"distribute": object()}, r"compile\(distribute=\.\.\.\) is a Keras 2 argument.*RingStrategy"),
    ({"sample_weight_mode": "temporal"}, r"sample_weight_mode.*fit\(\)"),
    ({"optimiser": "adam"}, r"keras Model\.compile\(\) got an unexpected keyword argument 'optimiser' \(it takes optimizer,"),
])
def test_keras2_arguments_with_a_meaning_fail_naming_the_replacement(kwargs, match):
    with pytest.raises(TypeError, match=match):
        small_model(**kwargs)


def test_errors_raised_inside_keras_keep_keras_frames_last():
    import traceback

    model = small_model()
    with pytest.raises(ValueError) as info:
        model.fit(np.zeros((4, 5), "float32"), np.zeros((4, 1), "float32"), verbose=0)  # wrong input width
    last = traceback.extract_tb(info.value.__traceback__)[-1]
    # The tfring package's own folder (not any path containing "tfring": a checkout named
    # .../tfring/ holds Keras in .../tfring/.venv/, which a fresh-clone check runs from).
    package = os.path.dirname(os.path.abspath(tfring.__file__)) + os.sep
    assert not os.path.abspath(last.filename).startswith(package), \
        f"the traceback ends in tfring: {last.filename}:{last.lineno}"


def test_one_rank_reduces_nothing_and_trains_like_plain_keras():
    """np=1: DistributedOptimizer returns the gradients as they are (Horovod's rule): no
    collective runs, and the model equals plain Keras' bit for bit."""
    x, y = data()

    def trained(optimizer):
        keras.utils.set_random_seed(3)
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="relu"), keras.layers.Dense(1)])
        model.compile(optimizer=optimizer, loss="mse")
        model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
        return [w.tolist() for w in model.get_weights()]

    plain = trained(keras.optimizers.Adam(0.01))
    before = tfring.stats()["collectives"]
    distributed = trained(hvd.DistributedOptimizer(keras.optimizers.Adam(0.01)))
    assert tfring.stats()["collectives"] == before, "a collective ran with one rank"
    assert distributed == plain
