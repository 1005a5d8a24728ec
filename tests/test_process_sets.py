"""Process sets (Horovod's hvd.ProcessSet, issue 14) across processes: collectives on subsets
of the ranks, at np=3 with the sets {0, 2}, {1} and {0, 1} running at once. NumPy API values,
add/remove at run time and the errors; TF eager and tf.function values and gradients,
DistributedGradientTape and the Keras DistributedOptimizer on a set (ranks outside keep
their own weights), the identity ops. Expected values are computed by hand from each rank's
inputs."""

import pytest

from tests.helpers import run_job

NUMPY_SCRIPT = r"""
import copy
import numpy as np
import tfring
from tfring import _errors as errors
from tfring._basics import process_sets

evens, one, low = tfring.ProcessSet([2, 0]), tfring.ProcessSet([1]), tfring.ProcessSet([0, 1])
tfring.init(process_sets=[evens, one, low])
r, n = tfring.rank(), tfring.size()
assert n == 3
assert (evens.process_set_id, one.process_set_id, low.process_set_id) == (1, 2, 3)
assert evens.ranks == [0, 2] and evens.size() == 2
assert evens.rank() == {0: 0, 1: -1, 2: 1}[r] and evens.included() == (r != 1)
assert tfring.global_process_set.process_set_id == 0 and tfring.global_process_set.size() == 3
assert tfring.global_process_set.ranks == [0, 1, 2], tfring.global_process_set  # every rank, as Horovod
assert str(tfring.global_process_set) == "ProcessSet(process_set_id=0, ranks=[0, 1, 2], mpi_comm=None)"  # Horovod's str
assert str(evens) == "ProcessSet(process_set_id=1, ranks=[0, 2], mpi_comm=None)", str(evens)

def x(k, dtype=np.float32):
    return np.full(k, float(r + 1), dtype)

# Every collective on every set this rank is in, all in flight at once (async), auto-named.
pending = []
for ps in (evens, one, low):
    if not ps.included():
        continue
    members, me = ps.ranks, ps.rank()
    pending.append(("sum", ps, tfring.allreduce_async(x(5), op=tfring.Sum, process_set=ps)))
    pending.append(("avg", ps, tfring.allreduce_async(x(3, np.float64), op=tfring.Average, process_set=ps)))
    pending.append(("gather", ps, tfring.allgather_async(np.full((me + 1, 2), r, np.int64), process_set=ps)))
    pending.append(("bcast", ps, tfring.broadcast_async(x(4) * 10, members[-1], process_set=ps)))
    a2a = np.concatenate([np.full(q + 1, 10 * r + q, np.int32) for q in range(len(members))])
    pending.append(("a2a", ps, tfring.alltoall_async(a2a, splits=[q + 1 for q in range(len(members))], process_set=ps)))
    pending.append(("rs", ps, tfring.reducescatter_async(np.arange(10, dtype=np.float32).reshape(5, 2) * (r + 1),
                                                         op=tfring.Sum, process_set=ps)))
# A global allreduce in between: ranks outside the sets number it as the members do.
total = tfring.allreduce(x(2), op=tfring.Sum)
assert np.all(total == 6), total
for kind, ps, handle in pending:
    got = handle.wait(60)
    members, me = ps.ranks, ps.rank()
    weight = sum(m + 1 for m in members)
    if kind == "sum":
        assert np.all(got == weight), (kind, ps, got)
    elif kind == "avg":
        assert np.allclose(got, weight / len(members)), (kind, ps, got)
    elif kind == "gather":
        want = np.concatenate([np.full((i + 1, 2), m, np.int64) for i, m in enumerate(members)])
        assert np.array_equal(got, want), (kind, ps, got)
    elif kind == "bcast":
        assert np.all(got == (members[-1] + 1) * 10), (kind, ps, got)
    elif kind == "a2a":
        received, splits = got
        assert list(splits) == [me + 1] * len(members), (kind, ps, splits)
        want = np.concatenate([np.full(me + 1, 10 * m + me, np.int32) for m in members])
        assert np.array_equal(received, want), (kind, ps, received)
    elif kind == "rs":
        full = np.arange(10, dtype=np.float32).reshape(5, 2) * weight
        rows = [5 // len(members) + (1 if i < 5 % len(members) else 0) for i in range(len(members))]
        start = sum(rows[:me])
        assert np.array_equal(got, full[start:start + rows[me]]), (kind, ps, got)

# Disjoint sets may use the same names at once (a shared optimizer's names, say).
mine = one if r == 1 else evens
shared = tfring.allreduce(x(2), op=tfring.Sum, name="shared", process_set=mine)
assert np.all(shared == sum(m + 1 for m in mine.ranks)), shared

# Errors: a set this rank is not in; an unknown id; the global set cannot be removed.
outside = one if r != 1 else evens
try:
    tfring.allreduce(x(2), process_set=outside, name="outsider")
    raise SystemExit("a collective on a set this rank is not in ran")
except errors.InvalidArgumentError as e:
    assert "not a member of process set" in str(e) and "'outsider'" in str(e) and f"rank {r}" in str(e), e
fake = tfring.ProcessSet([0])
fake.process_set_id = 10
try:
    tfring.allreduce(x(2), process_set=fake)
    raise SystemExit("an unknown process set id was accepted")
except ValueError as e:
    assert "id 10" in str(e), e
# As Horovod: the global set and sets never added are not removed (False, no communication).
assert tfring.remove_process_set(tfring.global_process_set) is False
assert tfring.remove_process_set(tfring.ProcessSet([0, 2])) is False
assert tfring.global_process_set.size() == 3 and evens.process_set_id == 1
# A duplicate of a registered set (the global one included) is a ValueError on every rank.
for dup in ([0, 1, 2], [2, 0], tfring.ProcessSet([0, 2]), evens):
    try:
        tfring.add_process_set(dup)
        raise SystemExit(f"a duplicate process set was added: {dup}")
    except ValueError as e:
        assert "duplicate process set" in str(e), e

# Add and remove at run time; ids are assigned in order and never reused.
tail = tfring.add_process_set([1, 2])
assert tail.process_set_id == 4 and tail.ranks == [1, 2]
if tail.included():
    got = tfring.allreduce(x(2), op=tfring.Sum, process_set=tail, name="tail")
    assert np.all(got == 5), got
assert tfring.remove_process_set(tail) is True
assert tail.process_set_id is None
assert tfring.remove_process_set(tail) is False  # removed already
stale = copy.copy(evens)                          # keeps id 1 after evens is removed
assert tfring.remove_process_set(evens) is True and stale.process_set_id == 1
assert tfring.remove_process_set(stale) is False  # its id is no longer registered
stale = tfring.add_process_set(stale)             # added anew under a new id, as Horovod
assert stale.process_set_id == 5 and process_sets.process_set_by_id(5) is stale, stale
try:
    tfring.allreduce(x(2), process_set=tail)
    raise SystemExit("a removed set was accepted")
except ValueError as e:
    assert "not registered" in str(e), e
again = tfring.add_process_set(tfring.ProcessSet([1, 2]))  # tail's ranks, free again; duplicates used no id
assert again.process_set_id == 6, again
if again.included():
    got = tfring.allreduce(x(2), op=tfring.Sum, process_set=again, name="again")
    assert np.all(got == 5), got
# A mismatched add fails on every rank, naming the ranks that differ.
try:
    tfring.add_process_set([0] if r != 2 else [2])
    raise SystemExit("a mismatched add_process_set succeeded")
except ValueError as e:
    assert "rank(s) [2] differ from rank 0" in str(e) and "rank 2: [2]" in str(e), e
after = tfring.add_process_set([0])  # the failed add used no id
assert after.process_set_id == 7, after
tfring.shutdown()
assert evens.process_set_id is None  # shutdown forgets every set
assert tfring.global_process_set.ranks == [] and tfring.global_process_set.process_set_id == 0
# init() with a duplicate entry (the global set, or an earlier entry) fails, naming the entry.
for sets, index in (([tfring.ProcessSet([0, 1, 2])], 0), ([tfring.ProcessSet([1]), tfring.ProcessSet([1])], 1)):
    try:
        tfring.init(process_sets=sets)
        raise SystemExit(f"init accepted the duplicate process sets {sets}")
    except ValueError as e:
        assert f"process_sets entry number {index} is a duplicate" in str(e), e
    assert tfring.global_process_set.ranks == [0, 1, 2]
    tfring.shutdown()
print("RANK-OK", r, flush=True)
"""

TF_SCRIPT = r"""
import numpy as np
import tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
import keras
import tfring.tensorflow as hvd
import tfring.keras as hvdk

evens, one = hvd.ProcessSet([0, 2]), hvd.ProcessSet([1])
hvd.init(process_sets=[evens, one])
r = hvd.rank()
mine = evens if r != 1 else one
assert int(hvd.size_op(process_set_id=evens.process_set_id)) == 2
assert int(hvd.process_set_included_op(process_set_id=evens.process_set_id)) == int(r != 1)
assert int(hvd.rank_op(process_set_id=evens.process_set_id)) == {0: 0, 1: -1, 2: 1}[r]

def values_and_grads(x):
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        s = hvd.allreduce(x, op=hvd.Sum, process_set=mine)
        a = hvd.allreduce(x, op=hvd.Average, process_set=mine)
        g = hvd.allgather(tf.reshape(x, [1, 2]), process_set=mine)
        b = hvd.broadcast(x, mine.ranks[-1], process_set=mine)
        loss = tf.reduce_sum(s * 1.0) + tf.reduce_sum(a * 2.0) + tf.reduce_sum(g * 3.0) + tf.reduce_sum(b * 4.0)
    return s, a, g, b, tape.gradient(loss, x)

for mode in ("eager", "function"):
    run = tf.function(values_and_grads) if mode == "function" else values_and_grads
    s, a, g, b, dx = run(tf.constant([1.0, 2.0]) * (r + 1))
    n = len(mine.ranks)
    weight = sum(m + 1 for m in mine.ranks)
    assert np.allclose(s, np.array([1.0, 2.0]) * weight), (mode, s)
    assert np.allclose(a, np.array([1.0, 2.0]) * weight / n), (mode, a)
    assert np.allclose(g, np.array([[1.0, 2.0]]) * np.array([[m + 1] for m in mine.ranks])), (mode, g)
    assert np.allclose(b, np.array([1.0, 2.0]) * (mine.ranks[-1] + 1)), (mode, b)
    # d/dx: Sum -> sum over members of 1 = n; Average -> 2; allgather -> Average of 3 = 3;
    # broadcast -> Average of 4 on the root, 0 elsewhere.
    root = r == mine.ranks[-1]
    want = n * 1.0 + 2.0 + 3.0 + (4.0 if root else 0.0)
    assert np.allclose(dx, want), (mode, dx, want)
    print("VALUES-OK", mode, r, flush=True)

# reducescatter (rows by the index in the set) and alltoall (one split per member), both modes.
n, me = len(mine.ranks), mine.rank()
weight = sum(m + 1 for m in mine.ranks)
rows = [3 // n + (1 if i < 3 % n else 0) for i in range(n)]
start = sum(rows[:me])
full = np.arange(6, dtype=np.float32).reshape(3, 2) * weight
def scatter_and_exchange(x):
    rs = hvd.reducescatter(x * float(r + 1), op=hvd.Sum, process_set=mine)
    got, splits = hvd.alltoall(tf.fill([n], float(r)), splits=[1] * n, process_set=mine)
    return rs, got, splits
for mode, fn in (("eager", scatter_and_exchange), ("function", tf.function(scatter_and_exchange))):
    rs, got, splits = fn(tf.reshape(tf.range(6, dtype=tf.float32), [3, 2]))
    assert np.array_equal(rs, full[start:start + rows[me]]), (mode, rs)
    assert np.array_equal(got, np.array(mine.ranks, np.float32)) and list(splits) == [1] * n, (mode, got, splits)
print("SCATTER-OK", r, flush=True)

# An op this rank is not in: tf.errors.InvalidArgumentError.
try:
    hvd.allreduce(tf.ones(2), process_set=one if r != 1 else evens, name="outsider")
    raise SystemExit("ran outside the set")
except tf.errors.InvalidArgumentError as e:
    assert "not a member of process set" in str(e), e

# DistributedGradientTape on the even set: rank 1 keeps its own gradient.
w = tf.Variable(0.0)
with tf.GradientTape() as tape:
    loss = w * float((r + 1) ** 2)
(gw,) = hvd.DistributedGradientTape(tape, process_set=evens).gradient(loss, [w])
want = (1.0 + 9.0) / 2 if r != 1 else 4.0  # every rank: (1 + 4 + 9) / 3
assert np.isclose(float(gw), want), (float(gw), want)
# A local source keeps its rank's gradient, divided by the set's size (by 1 outside the set).
local = tf.Variable(0.0)
with tf.GradientTape() as tape:
    loss = w * float((r + 1) ** 2) + local * 6.0
dtape = hvd.DistributedGradientTape(tape, process_set=evens)
dtape.register_local_source(local)
gw, gl = dtape.gradient(loss, [w, local])
assert np.isclose(float(gw), want), (float(gw), want)
assert np.isclose(float(gl), 3.0 if r != 1 else 6.0), float(gl)

# Keras DistributedOptimizer on the even set: ranks 0 and 2 take the same step, rank 1 its own.
model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, use_bias=False, kernel_initializer="zeros")])
opt = hvdk.DistributedOptimizer(keras.optimizers.SGD(1.0), process_set=evens)
model.compile(optimizer=opt, loss="mse")
xs = np.ones((4, 1), np.float32)
ys = np.full((4, 1), float((r + 1) ** 2), np.float32)
model.fit(xs, ys, batch_size=4, epochs=1, verbose=0, shuffle=False)
kernel2 = float(model.get_weights()[0][0, 0])
# The mse gradient at w = 0 is -2 y: evens average y = 1 and 9, rank 1 has y = 4.
want2 = 2.0 * (1.0 + 9.0) / 2 if r != 1 else 2.0 * 4.0  # every rank: 2 * 14 / 3
assert np.isclose(kernel2, want2), (kernel2, want2)
print("KERAS-OK", r, kernel2, flush=True)
hvd.barrier()  # a rank that shuts down ends the job for all: rank 1 waits for the set's fit
print("RANK-OK", r, flush=True)
"""


@pytest.mark.multiprocess
def test_numpy_collectives_on_overlapping_sets_add_remove_and_errors():
    result = run_job(3, NUMPY_SCRIPT, timeout=120)
    for r in range(3):
        assert f"RANK-OK {r}" in result.stdout, result.stdout


@pytest.mark.multiprocess
@pytest.mark.timeout(240)
def test_tf_values_gradients_tape_and_keras_optimizer_on_a_set():
    pytest.importorskip("tensorflow")
    result = run_job(3, TF_SCRIPT, timeout=220)
    for r in range(3):
        assert f"VALUES-OK eager {r}" in result.stdout and f"VALUES-OK function {r}" in result.stdout, result.stdout
        assert f"SCATTER-OK {r}" in result.stdout and f"RANK-OK {r}" in result.stdout, result.stdout


BAD_ADD_SCRIPT = """
import tfring
from tfring._basics import process_sets
tfring.init()
mine = [0, 7] if tfring.rank() == 1 else [0]             # rank 1 asks for a rank the job lacks
try:
    process_sets.add_process_set(mine)
except ValueError as e:
    print("ADD_FAILED", tfring.rank(), e, flush=True)
s = process_sets.ProcessSet([1])
kept = {s: "kept"}
process_sets.add_process_set(s)                              # the id changes; the dict still finds it
print("HASH_OK", tfring.rank(), kept[s], flush=True)
tfring.barrier()
"""


def test_a_bad_add_on_one_rank_fails_every_rank_at_once_and_sets_hash_by_ranks():
    result = run_job(2, BAD_ADD_SCRIPT, timeout=60, env={"TFRING_TIMEOUT_S": "600"})
    assert "ADD_FAILED 1 a process set needs ranks in 0..1. Received: [0, 7]" in result.stdout, result.stdout
    assert "ADD_FAILED 0 add_process_set() is collective" in result.stdout, result.stdout
    assert "rank(s) [1] differ from rank 0" in result.stdout, result.stdout
    for r in (0, 1):
        assert f"HASH_OK {r} kept" in result.stdout, result.stdout
