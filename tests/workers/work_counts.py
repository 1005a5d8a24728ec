"""The work one call does, counted (tests/test_work_counts.py): what one 8-byte allreduce
from a ``tf.function`` and one Keras ``fit`` step cost in things that do not depend on the
machine's speed -- Python function calls (all, and those in tfring's own modules), control
messages and bytes, data bytes, fusion copies, collectives -- so that work added to the
hot path fails a test instead of waiting for a benchmark.

  work_counts.py

Also measured: ``allreduce8+work``, the same call with work added on purpose (one Python
call into tfring and one more allreduce per call), which the test's budgets must refuse.

Counts are per call / per step: the difference between two runs of different lengths
(after a warm-up), divided by the difference in calls, so fixed costs (tracing, the first
negotiation) fall out. Prints ``COUNT <what> <name> <value>`` lines (values rounded to
3 decimals), then ``DONE``.
"""

import os
import sys

import numpy as np
import tensorflow as tf

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)

import keras

import tfring
import tfring.keras as hvd_keras
import tfring.tensorflow as hvd
from tools.tf_buffers import tensor_address

TFRING_DIR = os.path.dirname(os.path.abspath(tfring.__file__)) + os.sep
STATS = ("control_messages_sent", "control_bytes_sent", "bytes_sent", "bytes_received", "fusion_copied_bytes",
         "collectives", "tensors", "cached_tensors")

hvd.init()


class PythonCalls:
    """Counts Python function calls on this thread (sys.setprofile): all, and those whose
    code lives in tfring's package."""

    def __init__(self):
        self.total = self.tfring = 0

    def _profile(self, frame, event, arg):
        if event == "call":
            self.total += 1
            if frame.f_code.co_filename.startswith(TFRING_DIR):
                self.tfring += 1

    def __enter__(self):
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc):
        sys.setprofile(None)


def counted(run):
    """The counts of ``run()``: Python calls and the stats' differences."""
    before = tfring.stats()
    with PythonCalls() as calls:
        run()
    after = tfring.stats()
    counts = {name: after[name] - before[name] for name in STATS}
    counts.update(python_calls=calls.total, tfring_python_calls=calls.tfring)
    return counts


def per_call(run, short, long):
    """Counts per call of ``run(n)``: (counts of n=long - counts of n=short) / (long - short)."""
    a, b = counted(lambda: run(short)), counted(lambda: run(long))
    return {name: (b[name] - a[name]) / (long - short) for name in a}


def report(what, counts):
    for name, value in sorted(counts.items()):
        print(f"COUNT {what} {name} {value:.3f}", flush=True)


# -- one 8-byte allreduce from a tf.function ------------------------------------------------
def added_on_purpose():
    return tfring.rank()


@tf.function
def allreduce(t):
    return hvd.allreduce(t, op=hvd.Sum, name="work_counts.allreduce")


x = tf.ones([2], tf.float32)


@tf.function
def allreduce_twice(t):
    return hvd.allreduce(hvd.allreduce(t, op=hvd.Sum, name="work_counts.first"), op=hvd.Sum,
                         name="work_counts.second")


def allreduce_calls(n):
    for _ in range(n):
        allreduce(x)


def with_added_work(n):
    for _ in range(n):
        allreduce_twice(x)
        added_on_purpose()


allreduce_calls(20)  # trace, negotiate, fill the response cache
report("allreduce8", per_call(allreduce_calls, 20, 60))
with_added_work(20)
report("allreduce8+work", per_call(with_added_work, 20, 60))

# -- the output buffers of a held argument's allreduce -------------------------------------
# TF allocates the op's output per call; once the caller has dropped the last result, the
# next call gets the same buffer back from malloc, unless something still holds it. tfring's
# kernel held it until TF's done callback returned, by which time the woken caller had run
# its next call: the output alternated between two 16 MiB buffers (0.8-1.0 ms per call,
# docs/benchmarks.md). Counted: distinct output addresses over 20 calls after 5.
@tf.function
def allreduce_4mib(t):
    return hvd.allreduce(t, op=hvd.Sum, name="work_counts.4mib")


held = tf.ones([1 << 20], tf.float32)


def output_buffers(hold_previous):
    addresses, previous = set(), None
    for i in range(25):
        result = allreduce_4mib(held)
        if i >= 5:
            addresses.add(tensor_address(tf, result))
        previous = result if hold_previous else None  # noqa: F841 (held on purpose)
        del result
    return len(addresses)


report("allreduce_4mib", {"output_buffers": output_buffers(hold_previous=False)})
# The caller holding the previous result: two buffers in turn, which the budget must refuse.
report("allreduce_4mib+held", {"output_buffers": output_buffers(hold_previous=True)})

# -- one Keras fit step: DistributedOptimizer and the two callbacks of the README ---------
rng = np.random.default_rng(0)
features, labels = rng.random((4096, 8), dtype=np.float32), rng.integers(0, 4, 4096)
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(4)])
model.compile(optimizer=hvd_keras.DistributedOptimizer(keras.optimizers.SGD(0.01)),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
callbacks = [hvd_keras.callbacks.BroadcastGlobalVariablesCallback(0), hvd_keras.callbacks.MetricAverageCallback()]


def fit_steps(n):
    model.fit(features[:n * 16], labels[:n * 16], batch_size=16, epochs=1, verbose=0, callbacks=callbacks,
              shuffle=False)


fit_steps(4)  # build, trace, broadcast
report("keras_step", per_call(fit_steps, 10, 30))
print("DONE", flush=True)
