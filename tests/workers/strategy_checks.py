"""RingStrategy end to end, run with 1 and with 2 processes (same global batch).

argv[1]: a directory shared by the ranks. Rank 0 writes ``result_np<size>.npz`` (final
weights of fit and of a custom loop, evaluate(), predict(), synchronized BatchNorm
statistics, custom-loop losses and metric) for the test to compare across world sizes;
the checks that need several ranks run in the job and print "rank R: <check> OK".
"""

import os
import sys
import time

import numpy as np
import tensorflow as tf

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)

import keras

import tfring
import tfring.keras as hvd

strategy = tfring.RingStrategy()
rank, size = tfring.rank(), tfring.size()
out = sys.argv[1]
B = 64  # GLOBAL batch size in every run
results = {}


_t0 = time.time()


def ok(what):
    print(f"rank {rank}: {what} OK ({time.time() - _t0:.1f} s)", flush=True)


def rows(values):
    """Every rank's copy of a flat vector, one row per rank (NumPy collective)."""
    return tfring.allgather(np.asarray(values, np.float64).reshape(1, -1))


def assert_same_on_all_ranks(values, what):
    got = rows(values)
    for r in range(1, size):
        assert np.array_equal(got[0], got[r]), f"{what} differs between rank 0 and rank {r}: {got}"


def flat(variables):
    return np.concatenate([np.ravel(np.asarray(v.numpy(), np.float64)) for v in variables])


rng = np.random.RandomState(0)
N = 256
X = rng.normal(size=(N, 8)).astype("float32")
Y = (X @ rng.normal(size=(8, 4))).argmax(1).astype("int32")


def build(seed=1, batchnorm=False):
    keras.utils.set_random_seed(seed)  # rank 0's initialization is the same in every run
    layers = [keras.Input((8,)), keras.layers.Dense(16, activation="tanh")]
    if batchnorm:
        layers.append(keras.layers.BatchNormalization(synchronized=True))
    layers.append(keras.layers.Dense(4, activation="softmax"))
    return keras.Sequential(layers)


# -- 0. the strategy's basics ------------------------------------------------------------
assert strategy.num_replicas_in_sync == size
assert strategy.extended.should_checkpoint == (rank == 0)
assert strategy.extended.should_save_summary == (rank == 0)
ok("basics")

# -- 0b. the roles TF's multi-worker code reads (issue 28): rank 0 is the chief -------------
from tensorflow.python.distribute import multi_worker_util  # what TF's helpers ask

resolver = strategy.cluster_resolver
assert isinstance(resolver, tf.distribute.cluster_resolver.ClusterResolver), resolver
assert (resolver.task_type, resolver.task_id) == ("worker", rank), (resolver.task_type, resolver.task_id)
spec = resolver.cluster_spec()
assert spec.jobs == ["worker"] and spec.num_tasks("worker") == size, spec.as_dict()
assert multi_worker_util.is_chief(spec, resolver.task_type, resolver.task_id) == (rank == 0)
assert multi_worker_util.id_in_cluster(spec, resolver.task_type, resolver.task_id) == rank
assert multi_worker_util.worker_count(spec, resolver.task_type) == size
tutorial_is_chief = resolver.task_type == "chief" or (resolver.task_type == "worker" and resolver.task_id == 0)
assert tutorial_is_chief == (rank == 0) == strategy.extended.should_checkpoint == strategy.extended._is_chief
assert strategy.extended.experimental_should_init is True
assert not strategy.extended._in_multi_worker_mode()  # keeps Keras' fit on plain batches
assert resolver.master() == "" and resolver.num_accelerators() == {}, resolver.num_accelerators()
ok("cluster resolver: rank 0 is the chief")

# -- 1. model.fit / evaluate / predict with a global batch size ---------------------------
with strategy.scope():
    keras.utils.set_random_seed(1000 + rank)  # different per rank: creation must broadcast
    model = build(seed=1) if rank == 0 else keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(16, activation="tanh"), keras.layers.Dense(4, activation="softmax")])
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
assert_same_on_all_ranks(flat(model.variables), "initial weights")
ok("variables start equal")

history = model.fit(X, Y, batch_size=B, epochs=3, shuffle=False, verbose=0, validation_data=(X[:128], Y[:128]))
results["fit_weights"] = flat(model.trainable_variables)
results["fit_loss"] = np.array(history.history["loss"] + history.history["val_loss"] + history.history["accuracy"])
assert_same_on_all_ranks(results["fit_weights"], "weights after fit")
assert_same_on_all_ranks(results["fit_loss"], "fit history")
ok("fit")

evaluation = model.evaluate(X, Y, batch_size=B, verbose=0)
results["evaluate"] = np.array(evaluation)
# a dataset the strategy already distributed is not split again by Keras
prepared = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((X, Y)).batch(B))
assert strategy.experimental_distribute_dataset(prepared) is prepared
assert int(prepared.cardinality()) == N // B  # a slice of each global batch
assert np.allclose(model.evaluate(prepared, verbose=0), evaluation, atol=1e-6)
assert_same_on_all_ranks(results["evaluate"], "evaluate()")
ok("evaluate equal on all ranks")

XP = X[:100]  # 64 + 36 rows: a partial last batch
predictions = model.predict(XP, batch_size=B, verbose=0)
assert predictions.shape == (100, 4), predictions.shape
results["predict"] = predictions
assert np.allclose(predictions, model(XP).numpy(), atol=1e-6)  # every row, in order
ok("predict returns every row in order")

# -- 2. custom training loop --------------------------------------------------------------
with strategy.scope():
    loop_model = build(seed=2)
    loop_optimizer = keras.optimizers.SGD(0.5)
    accuracy = keras.metrics.SparseCategoricalAccuracy()
loss_fn = keras.losses.SparseCategoricalCrossentropy(reduction=None)
dataset = tf.data.Dataset.from_tensor_slices((X, Y)).batch(B)
dist_dataset = strategy.experimental_distribute_dataset(dataset)


@tf.function
def train_step(batch):
    def step(x, y):
        assert x.shape[0] in (None, B // size), x.shape
        with tf.GradientTape() as tape:
            probs = loop_model(x, training=True)
            loss = tf.nn.compute_average_loss(loss_fn(y, probs), global_batch_size=B)
        grads = tape.gradient(loss, loop_model.trainable_variables)
        loop_optimizer.apply_gradients(zip(grads, loop_model.trainable_variables))
        accuracy.update_state(y, probs)
        return loss

    per_replica = strategy.run(step, args=batch)
    return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)


losses = []
for _ in range(3):
    accuracy.reset_state()
    for batch in dist_dataset:
        losses.append(float(train_step(batch)))
results["loop_weights"] = flat(loop_model.trainable_variables)
results["loop_losses"] = np.array(losses)
results["loop_accuracy"] = np.array([float(accuracy.result())])
assert_same_on_all_ranks(results["loop_weights"], "custom-loop weights")
assert_same_on_all_ranks(results["loop_accuracy"], "custom-loop metric")
ok("custom loop")

# -- 3. synchronized BatchNormalization -----------------------------------------------------
with strategy.scope():
    bn_model = build(seed=3, batchnorm=True)
    bn_model.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy",
                     steps_per_execution=2)
bn_model.fit(X, Y, batch_size=B, epochs=1, shuffle=False, verbose=0)
bn = bn_model.layers[1]
results["bn_stats"] = flat([bn.moving_mean, bn.moving_variance])
assert_same_on_all_ranks(results["bn_stats"], "synchronized BatchNormalization statistics")
ok("synchronized batch norm")

# -- 4. collectives of the strategy and replica context ------------------------------------
@tf.function
def collectives():
    def fn():
        ctx = tf.distribute.get_replica_context()
        r = tf.cast(ctx.replica_id_in_sync_group, tf.float32)
        summed = ctx.all_reduce(tf.distribute.ReduceOp.SUM, [r + 1.0, tf.fill([3], r)])
        mean = ctx.all_reduce(tf.distribute.ReduceOp.MEAN, r)
        gathered = ctx.all_gather(tf.fill([int(rank) + 1, 2], r), axis=0)
        return summed, mean, gathered, tf.fill([2, int(rank) + 1], r)

    summed, mean, gathered, local = strategy.run(fn)
    return summed, mean, gathered, strategy.gather(local, axis=1), strategy.reduce("MEAN", mean, axis=None)


summed, mean, gathered, gathered_axis1, reduced = collectives()
expected_rows = np.concatenate([np.full((r + 1, 2), r, np.float32) for r in range(size)])
assert float(summed[0]) == sum(range(1, size + 1)), summed
assert np.array_equal(summed[1].numpy(), np.full(3, sum(range(size)), np.float32))
assert float(mean) == np.mean(range(size)) == float(reduced)
assert np.array_equal(gathered.numpy(), expected_rows), gathered
assert np.array_equal(gathered_axis1.numpy(), expected_rows.T), gathered_axis1
eager_sum = strategy.reduce("SUM", tf.constant([1.0, float(rank)]), axis=None)
assert eager_sum.numpy().tolist() == [size, sum(range(size))], eager_sum
batch_mean = strategy.reduce("MEAN", tf.fill([rank + 1], float(rank)), axis=0)  # over all rows
assert np.isclose(float(batch_mean), sum(r * (r + 1) for r in range(size)) / sum(range(1, size + 1)))
eager = strategy.run(lambda: tf.distribute.get_replica_context().all_reduce("SUM", tf.constant(float(rank))))
assert float(eager) == sum(range(size)), eager
ok("reduce / gather / all_reduce / all_gather")

# variables created inside a tf.function (initializer broadcast in the graph) start equal too
holder = []


@tf.function
def make_variable():
    if not holder:
        with strategy.scope():
            holder.append(tf.Variable(tf.fill([2], float(rank) + 1.0)))
    return holder[0].read_value()


assert make_variable().numpy().tolist() == [1.0, 1.0]
with strategy.scope():  # dtypes the core does not move natively travel as bytes
    odd = [tf.Variable(tf.fill([3], tf.constant(rank + 1, dtype))) for dtype in (tf.int16, tf.uint32, tf.complex64)]
    text = tf.Variable(f"rank {rank}")  # strings are left alone
assert [v.numpy().tolist() for v in odd] == [[1, 1, 1], [1, 1, 1], [1 + 0j, 1 + 0j, 1 + 0j]], odd
assert text.numpy().decode() == f"rank {rank}"
ok("variables created in tf.function start equal")

# -- 5. input contexts -----------------------------------------------------------------------
seen = []


def dataset_fn(ctx):
    seen.append((ctx.input_pipeline_id, ctx.num_input_pipelines, ctx.num_replicas_in_sync,
                 ctx.get_per_replica_batch_size(B)))
    return tf.data.Dataset.range(N).shard(ctx.num_input_pipelines, ctx.input_pipeline_id).batch(
        ctx.get_per_replica_batch_size(B))


first = next(iter(strategy.distribute_datasets_from_function(dataset_fn)))
assert seen == [(rank, size, size, B // size)], seen
assert first.numpy().tolist() == list(range(rank, N, size))[: B // size], first
ids = strategy.experimental_distribute_values_from_function(lambda ctx: ctx.replica_id_in_sync_group)
assert ids == rank
shard = next(iter(strategy.experimental_distribute_dataset(tf.data.Dataset.range(N).batch(B))))
assert shard.numpy().tolist() == list(range(rank * B // size, (rank + 1) * B // size)), shard
ok("input contexts")

# -- 6. tf.summary is written once ------------------------------------------------------------
logdir = os.path.join(out, "summaries", f"rank{rank}")
writer = tf.summary.create_file_writer(logdir)


@tf.function
def summarize(step):
    def fn():
        tf.summary.scalar("replica_scalar", 1.0, step=step)
        return tf.constant(0)

    with writer.as_default():
        strategy.run(fn)


summarize(tf.constant(0, tf.int64))
writer.flush()
tags = []
for name in os.listdir(logdir):
    for record in tf.data.TFRecordDataset(os.path.join(logdir, name)):
        event = tf.compat.v1.Event.FromString(record.numpy())
        tags += [v.tag for v in event.summary.value]
assert tags == (["replica_scalar"] if rank == 0 else []), tags
ok("summaries from rank 0 only")

# -- 7. checkpoints: rank 0 writes, every rank reads --------------------------------------------
ckpt_dir = os.path.join(out, "ckpt")
checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
if strategy.extended.should_checkpoint:
    checkpoint.write(os.path.join(ckpt_dir, "ckpt"))
    model.save(os.path.join(ckpt_dir, "model.keras"))
tfring.barrier(name="checkpoint_written")
assert sorted(os.listdir(ckpt_dir)) == ["ckpt.data-00000-of-00001", "ckpt.index", "model.keras"]
saved = flat(model.variables)
with strategy.scope():
    restored = build(seed=50 + rank)
    restored.compile(optimizer=keras.optimizers.SGD(0.5), loss="sparse_categorical_crossentropy",
                     metrics=["accuracy"])
    restored.optimizer.build(restored.trainable_variables)
    tf.train.Checkpoint(model=restored, optimizer=restored.optimizer).read(
        os.path.join(ckpt_dir, "ckpt")).assert_existing_objects_matched()
    loaded = keras.models.load_model(os.path.join(ckpt_dir, "model.keras"))
assert np.array_equal(flat(restored.variables), saved)
# only rank 0 reads the checkpoint, then its state is broadcast
with strategy.scope():
    rank0_only = build(seed=60)
    rank0_only.compile(optimizer=keras.optimizers.SGD(0.5), loss="sparse_categorical_crossentropy",
                       metrics=["accuracy"])
    rank0_only.optimizer.build(rank0_only.trainable_variables)
if rank == 0:
    tf.train.Checkpoint(model=rank0_only, optimizer=rank0_only.optimizer).read(os.path.join(ckpt_dir, "ckpt"))
hvd.broadcast_model_state(rank0_only, root_rank=0)
assert np.array_equal(flat(rank0_only.variables), saved)
assert np.array_equal(flat(loaded.trainable_variables), flat(model.trainable_variables))
assert int(restored.optimizer.iterations.numpy()) == int(model.optimizer.iterations.numpy())
loaded.fit(X, Y, batch_size=B, epochs=1, shuffle=False, verbose=0)
assert_same_on_all_ranks(flat(loaded.variables), "weights after load_model + fit")
ok("checkpoints")

# -- 8. random states: each rank its own stream (rank 0's seed offset by the rank) ---------------
keras.utils.set_random_seed(7)
with strategy.scope():
    dropout = keras.layers.Dropout(0.5)
states = rows(dropout.seed_generator.state.numpy())
for r in range(size):
    assert states[r].tolist() == [states[0][0] + r, states[0][1]], states
masks = rows(dropout(tf.ones([4, 8]), training=True).numpy().ravel())
assert size == 1 or not np.array_equal(masks[0], masks[1]), "ranks drew the same dropout masks"
ok("random states differ per rank")

# -- 9. tfring.keras.DistributedOptimizer under the strategy does not reduce twice -------------
import tfring.keras as hvd

with strategy.scope():
    twice = build(seed=6)
    twice.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.5)),
                  loss="sparse_categorical_crossentropy")
    once = build(seed=6)
    once.compile(optimizer=keras.optimizers.SGD(0.5), loss="sparse_categorical_crossentropy")
twice.fit(X, Y, batch_size=B, epochs=1, shuffle=False, verbose=0)
once.fit(X, Y, batch_size=B, epochs=1, shuffle=False, verbose=0)
assert np.allclose(flat(twice.trainable_variables), flat(once.trainable_variables), atol=1e-6)
ok("DistributedOptimizer under the strategy")

# -- 10. XLA: jit_compile stays on (no warning); fit and strategy.run compile -----------------------
with strategy.scope():
    xla_model = build(seed=4)
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        xla_model.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy",
                          jit_compile=True)
assert xla_model.jit_compile is True
assert not [w for w in caught if "jit_compile" in str(w.message)], [str(w.message) for w in caught]
xla_model.fit(X[:B], Y[:B], batch_size=B, verbose=0)
assert xla_model.jit_compile is True


@tf.function(jit_compile=True)
def xla_step():
    return strategy.run(lambda: tf.distribute.get_replica_context().all_reduce("SUM", 1.0))


xla_sum = float(xla_step())
assert xla_sum == float(size), xla_sum
ok("XLA")

# -- 11. mixed precision: one rank overflowing skips the step on every rank ---------------------
keras.mixed_precision.set_global_policy("mixed_float16")
with strategy.scope():
    mp_model = build(seed=5)
    mp_model.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy")
assert type(mp_model.optimizer).__module__.startswith("tfring."), type(mp_model.optimizer)
XO = X[:B].copy()
XO[B - 1] = 1e6  # the last row of the global batch: rank size-1's shard only
before = flat(mp_model.trainable_variables)
mp_model.fit(XO, Y[:B], batch_size=B, epochs=1, shuffle=False, verbose=0)
assert np.array_equal(flat(mp_model.trainable_variables), before), "the overflowing step was applied"
assert float(mp_model.optimizer.dynamic_scale.numpy()) == 2.0 ** 14, mp_model.optimizer.dynamic_scale
mp_model.fit(X, Y, batch_size=B, epochs=1, shuffle=False, verbose=0)
results["mixed_precision_weights"] = flat(mp_model.trainable_variables)
assert_same_on_all_ranks(results["mixed_precision_weights"], "mixed-precision weights")
keras.mixed_precision.set_global_policy("float32")
ok("mixed precision")

if rank == 0:
    np.savez(os.path.join(out, f"result_np{size}.npz"), **results)
tfring.barrier(name="done")
print(f"rank {rank}: strategy checks OK", flush=True)
