"""Worker: every tfring.tensorflow collective x dtype x reduce op, with rank-dependent
shapes, eagerly and inside one tf.function, against NumPy; gradients of every op against
analytic values; fp16 compression; IndexedSlices; DistributedGradientTape; retracing and
repeated calls; explicit names; variables and objects; a tf.compat.v1 graph.
Prints "rank R: tf collectives OK" at the end."""

import itertools
import warnings

import numpy as np
import tensorflow as tf

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
tf.get_logger().setLevel("ERROR")
warnings.simplefilter("ignore", DeprecationWarning)

import tfring
import tfring.tensorflow as hvd

hvd.init()
r, n = hvd.rank(), hvd.size()
assert (r, n) == (tfring.rank(), tfring.size())  # one runtime for the kernels and the module

DTYPES = [tf.uint8, tf.int8, tf.int16, tf.uint16, tf.int32, tf.int64, tf.float16, tf.bfloat16, tf.float32, tf.float64,
          tf.bool]
OPS = {hvd.Sum: "Sum", hvd.Average: "Average", hvd.Min: "Min", hvd.Max: "Max", hvd.Product: "Product"}


def data(dtype, shape, rank, kind="sum"):
    """Deterministic, rank-dependent values every rank can recompute for any rank."""
    base = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    if dtype == tf.bool:
        return (base + rank) % 2 == 0
    if kind == "prod":
        v = (base + rank) % 2 + 1
    elif dtype in (tf.int8, tf.int16, tf.int32, tf.int64, tf.float16, tf.bfloat16, tf.float32, tf.float64):
        v = base % 5 - 2 + rank
    else:
        v = base % 5 + rank
    return v.astype(dtype.as_numpy_dtype)


def ref_reduce(dtype, shape, op):
    xs = np.stack([data(dtype, shape, j, "prod" if op == hvd.Product else "sum") for j in range(n)])
    if dtype == tf.bool:
        return xs.any(0) if op in (hvd.Sum, hvd.Max) else xs.all(0)
    xs = xs.astype(np.float64)
    out = {hvd.Sum: xs.sum(0), hvd.Average: xs.sum(0) * (1.0 / n), hvd.Min: xs.min(0), hvd.Max: xs.max(0),
           hvd.Product: xs.prod(0)}[op]
    if dtype.is_integer:
        out = np.trunc(out)
    return out


def close(label, got, want, dtype):
    got = np.asarray(got)
    if dtype == tf.bool:
        ok = got.shape == np.shape(want) and np.array_equal(got, want)
    else:
        tol = 2e-2 if dtype in (tf.float16, tf.bfloat16) else 1e-6
        ok = got.shape == np.shape(want) and np.allclose(got.astype(np.float64), want, rtol=tol, atol=tol)
    assert ok, f"rank {r}: {label}: got {got!r}, want {want!r}"


def rows_of(j):
    return j + 1  # rank j contributes j + 1 rows to allgather


def a2a_splits(j):
    return [(j + k) % 3 for k in range(n)]  # rows rank j sends to each rank (zeros included)


# ---------------------------------------------------------------- collectives vs NumPy
def cases():
    """(label, thunk building the tensor(s), expected, dtype, postprocess)."""
    out = []
    for dtype in DTYPES:
        name = dtype.name
        shape = (2, 3)
        for op, op_name in OPS.items():
            if dtype == tf.bool and op == hvd.Average:
                continue
            x = data(dtype, shape, r, "prod" if op == hvd.Product else "sum")
            out.append((f"allreduce {name} {op_name}", lambda x=x, op=op: hvd.allreduce(tf.constant(x), op=op),
                        ref_reduce(dtype, shape, op), dtype))
        x = data(dtype, (rows_of(r), 3), r)
        want = np.concatenate([data(dtype, (rows_of(j), 3), j) for j in range(n)])
        out.append((f"allgather {name}", lambda x=x: hvd.allgather(tf.constant(x)), want, dtype))
        x0 = data(dtype, (r, 2), r)  # rank 0 sends no rows
        want0 = np.concatenate([data(dtype, (j, 2), j) for j in range(n)])
        out.append((f"allgather empty-rank {name}", lambda x=x0: hvd.allgather(tf.constant(x)), want0, dtype))
        root = n - 1
        x = data(dtype, (4,), r)
        out.append((f"broadcast {name}", lambda x=x, root=root: hvd.broadcast(tf.constant(x), root), data(dtype, (4,), root),
                    dtype))
        sends = a2a_splits(r)
        x = data(dtype, (sum(sends), 2), r)
        parts = []
        for j in range(n):
            theirs = data(dtype, (sum(a2a_splits(j)), 2), j)
            start = sum(a2a_splits(j)[:r])
            parts.append(theirs[start : start + a2a_splits(j)[r]])
        out.append((f"alltoall {name}", lambda x=x, s=sends: hvd.alltoall(tf.constant(x), splits=s)[0],
                    np.concatenate(parts), dtype))
        out.append((f"alltoall splits {name}", lambda x=x, s=sends: hvd.alltoall(tf.constant(x), splits=s)[1],
                    np.array([a2a_splits(j)[r] for j in range(n)]), tf.int32))
        rs_ops = [hvd.Sum, hvd.Max] + ([] if dtype == tf.bool else [hvd.Average])
        dim0 = 2 * n + 1
        lo = sum(dim0 // n + (k < dim0 % n) for k in range(r))
        hi = lo + dim0 // n + (r < dim0 % n)
        for op in rs_ops:
            x = data(dtype, (dim0, 2), r)
            out.append((f"reducescatter {name} {OPS[op]}",
                        lambda x=x, op=op: hvd.reducescatter(tf.constant(x), op=op),
                        ref_reduce(dtype, (dim0, 2), op)[lo:hi], dtype))
    # even alltoall without splits, scaled allreduce, grouped allreduce with mixed dtypes
    x = data(tf.float32, (2 * n, 2), r)
    want = np.concatenate([data(tf.float32, (2 * n, 2), j)[2 * r : 2 * r + 2] for j in range(n)])
    out.append(("alltoall even", lambda x=x: hvd.alltoall(tf.constant(x)), want, tf.float32))  # no splits: a tensor
    for dtype in (tf.float32, tf.float64, tf.int32):
        x = data(dtype, (5,), r)
        want = ref_reduce(dtype, (5,), hvd.Sum) * 3.0 if dtype.is_floating else np.trunc(
            np.trunc(np.stack([data(dtype, (5,), j) for j in range(n)]).astype(np.float64) * 0.5).sum(0) * 3.0)
        out.append((f"scaled allreduce {dtype.name}",
                    lambda x=x: hvd.allreduce(tf.constant(x), op=hvd.Sum, prescale_factor=0.5, postscale_factor=6.0)
                    if x.dtype.kind == "f" else
                    hvd.allreduce(tf.constant(x), op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0),
                    want, dtype))
    group_inputs = [data(d, (3,), r) for d in (tf.float32, tf.int32, tf.float64, tf.float32)]
    for i, d in enumerate((tf.float32, tf.int32, tf.float64, tf.float32)):
        out.append((f"grouped member {i}",
                    lambda i=i: hvd.grouped_allreduce([tf.constant(g) for g in group_inputs], op=hvd.Sum)[i],
                    ref_reduce(d, (3,), hvd.Sum), d))
    # fp16 compression: float32 in and out, float16 on the wire
    x = data(tf.float32, (6,), r) / 3.0
    want = np.stack([data(tf.float32, (6,), j) / 3.0 for j in range(n)]).astype(np.float64).mean(0)
    out.append(("fp16 compression",
                lambda x=x: hvd.allreduce(tf.constant(x), compression=hvd.Compression.fp16), want, tf.float16))
    out.append(("average=False is Sum", lambda: hvd.allreduce(tf.constant([1.0, 2.0]), average=False),
                np.array([1.0, 2.0]) * n, tf.float32))
    return out


def check_all_eager():
    for label, thunk, want, dtype in cases():
        close("eager " + label, thunk().numpy(), want, dtype)


def check_all_in_one_function():
    all_cases = cases()

    @tf.function(autograph=False)
    def everything():  # ~100 collectives in one graph: they run concurrently
        return [thunk() for _, thunk, _, _ in all_cases]

    results = everything()
    for (label, _, want, dtype), got in zip(all_cases, results):
        close("tf.function " + label, got.numpy(), want, dtype)
    graph = everything.get_concrete_function().graph
    fp16 = [o for o in graph.get_operations() if o.type == "TfringAllreduce" and o.get_attr("T") == tf.float16]
    assert fp16, "fp16 compression must put float16 on the wire"


check_all_eager()
check_all_in_one_function()
check_all_eager()  # eager counters still agree after graph work

# ---------------------------------------------------------------- empty tensors and short dims
assert hvd.allreduce(tf.zeros([0, 3])).shape == (0, 3)
assert hvd.allgather(tf.zeros([0, 2])).shape == (0, 2)
received, splits = hvd.alltoall(tf.zeros([0, 2]), splits=[0] * n)
assert received.shape == (0, 2) and splits.numpy().tolist() == [0] * n
assert hvd.reducescatter(tf.ones([1, 2]), op=hvd.Sum).numpy().tolist() == ([[float(n)] * 2] if r == 0 else [])
assert hvd.broadcast(tf.zeros([0]), 0).shape == (0,)
assert hvd.grouped_allreduce([tf.zeros([0]), tf.ones([1])], op=hvd.Sum)[1].numpy().tolist() == [float(n)]

# ---------------------------------------------------------------- gradients vs analytic
W = np.array([j + 1.0 for j in range(n)])  # rank j weighs its output by W[j]


def grad_of(fn, x0, in_function):
    x = tf.Variable(x0)

    def compute():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(fn(x) * W[r])
        return tape.gradient(loss, x)

    return (tf.function(compute, autograph=False)() if in_function else compute()).numpy()


def check_gradients(in_function):
    mode = "tf.function" if in_function else "eager"
    for dtype in (tf.float32, tf.float64):
        x0 = data(dtype, (3,), r)
        pre, post = 0.5, 3.0
        for op, scale in ((hvd.Sum, pre * post), (hvd.Average, pre * post / n)):
            g = grad_of(lambda x, op=op, pre=pre, post=post: hvd.allreduce(x, op=op, prescale_factor=pre,
                                                                                 postscale_factor=post),
                        x0, in_function)
            close(f"{mode} grad allreduce {OPS[op]}", g, np.full(3, W.sum() * scale), dtype)
        # Min / Max: to the extreme rank, split among ties (element 2 ties on every rank)
        xs = np.stack([np.array([j + 1.0, n - j, 2.0]) for j in range(n)])
        for op, pick in ((hvd.Max, np.max), (hvd.Min, np.min)):
            hits = (xs == pick(xs, 0)).astype(np.float64)
            want = W.sum() * hits[r] / hits.sum(0) * pre * post
            g = grad_of(lambda x, op=op, pre=pre, post=post: hvd.allreduce(x, op=op, prescale_factor=pre,
                                                                                 postscale_factor=post),
                        xs[r].astype(dtype.as_numpy_dtype), in_function)
            close(f"{mode} grad allreduce {OPS[op]}", g, want, dtype)
        xs = np.stack([np.array([j + 1.0, 0.0 if j == 0 else 2.0, -1.0]) for j in range(n)])
        others = np.prod(np.delete(xs, r, axis=0), axis=0)
        g = grad_of(lambda x: hvd.allreduce(x, op=hvd.Product), xs[r].astype(dtype.as_numpy_dtype), in_function)
        close(f"{mode} grad allreduce Product", g, W.sum() * others, dtype)
        # grouped: each member like a single allreduce
        g = grad_of(lambda x: tf.add_n(hvd.grouped_allreduce([x, 2.0 * x], op=hvd.Sum)), x0, in_function)
        close(f"{mode} grad grouped", g, np.full(3, 3.0 * W.sum()), dtype)
        # allgather (Horovod's rule): the average of every rank's weights over this rank's rows
        g = grad_of(lambda x: hvd.allgather(x), data(dtype, (rows_of(r), 2), r), in_function)
        close(f"{mode} grad allgather", g, np.full((rows_of(r), 2), W.mean()), dtype)
        # broadcast (Horovod's rule): the root gets the average, the others zero
        root = n - 1
        g = grad_of(lambda x, root=root: hvd.broadcast(x, root), x0, in_function)
        close(f"{mode} grad broadcast", g, np.full(3, W.mean() if r == root else 0.0), dtype)
        # alltoall: rows sent to rank j get W[j]
        sends = a2a_splits(r)
        g = grad_of(lambda x, sends=sends: hvd.alltoall(x, splits=sends)[0], data(dtype, (sum(sends), 2), r),
                    in_function)
        want = np.concatenate([np.full((s, 2), W[j]) for j, s in enumerate(sends)])
        close(f"{mode} grad alltoall", g, want, dtype)
        # reducescatter (Horovod's rule): row owned by rank j gets W[j], times n for Sum
        dim0 = 2 * n + 1
        owner = list(itertools.chain.from_iterable([j] * (dim0 // n + (j < dim0 % n)) for j in range(n)))
        for op, scale in ((hvd.Sum, float(n)), (hvd.Average, 1.0)):
            g = grad_of(lambda x, op=op: hvd.reducescatter(x, op=op), data(dtype, (dim0, 2), r), in_function)
            close(f"{mode} grad reducescatter {OPS[op]}", g, np.repeat(W[owner][:, None] * scale, 2, 1), dtype)


check_gradients(in_function=False)
check_gradients(in_function=True)

# ---------------------------------------------------------------- IndexedSlices
emb = tf.Variable(np.zeros((6, 2), np.float32))
ids = tf.constant([r % 6, (r + 2) % 6])
with tf.GradientTape() as tape:
    loss = tf.reduce_sum(tf.gather(emb, ids) * (r + 1.0))
local = tape.gradient(loss, emb)
assert isinstance(local, tf.IndexedSlices)
dense_sum = np.zeros((6, 2))
for j in range(n):
    for i in (j % 6, (j + 2) % 6):
        dense_sum[i] += j + 1.0
for op, scale in ((hvd.Average, 1.0 / n), (hvd.Sum, 1.0)):
    red = hvd.allreduce(local, op=op)
    assert isinstance(red, tf.IndexedSlices), type(red)
    close(f"IndexedSlices {OPS[op]}", tf.convert_to_tensor(red).numpy(), dense_sum * scale, tf.float32)
try:
    hvd.allreduce(local, op=hvd.Max)
except NotImplementedError:
    pass
else:
    raise AssertionError("IndexedSlices with Max must be refused")

# ---------------------------------------------------------------- DistributedGradientTape
w = tf.Variable(np.ones((3, 2), np.float32))
b = tf.Variable(np.zeros(2, np.float32))
xb = tf.constant(data(tf.float32, (4, 3), r))


def loss_fn():
    return tf.reduce_mean(tf.square(tf.matmul(xb, w) + b)) + tf.reduce_sum(tf.gather(emb, ids))


for sparse_as_dense in (False, True):
    with tf.GradientTape() as tape:
        loss = loss_fn()
    local_grads = [tf.convert_to_tensor(g).numpy() for g in tape.gradient(loss, [w, b, emb])]
    with tf.GradientTape() as tape:
        loss = loss_fn()
    tape = hvd.DistributedGradientTape(tape, sparse_as_dense=sparse_as_dense)
    assert isinstance(tape, tf.GradientTape)
    grads = tape.gradient(loss, [w, b, emb])
    assert isinstance(grads[2], tf.Tensor if sparse_as_dense else tf.IndexedSlices)
    everyone = hvd.allgather_object(local_grads)
    for k, g in enumerate(grads):
        close(f"tape grad {k}", tf.convert_to_tensor(g).numpy(), np.mean([e[k] for e in everyone], 0), tf.float32)


@tf.function(autograph=False)
def tape_step():
    with tf.GradientTape() as tape:
        loss = loss_fn()
    tape = hvd.DistributedGradientTape(tape, op=hvd.Sum, compression=hvd.Compression.fp16)
    return tape.gradient(loss, [w, b])


grads = tape_step()
close("tape in tf.function", grads[1].numpy(), np.sum([e[1] for e in everyone], 0), tf.float16)
ops_in_step = [o for o in tape_step.get_concrete_function().graph.get_operations() if o.type.startswith("Tfring")]
assert [o.type for o in ops_in_step] == ["TfringGroupedAllreduce"], ops_in_step  # one group for all grads

# ---------------------------------------------------------------- retracing and repeated calls


@tf.function(autograph=False)
def gather_fn(x):
    return hvd.allgather(x), hvd.allreduce(tf.reduce_sum(x), op=hvd.Sum)


for step in range(6):
    # rank 0 changes its shape every step (retraces), the others keep theirs
    my_rows = (1 + step % 3) if r == 0 else 2
    rows = [(1 + step % 3) if j == 0 else 2 for j in range(n)]
    gathered, total = gather_fn(tf.fill([my_rows], float(r)))
    assert gathered.numpy().tolist() == [float(j) for j in range(n) for _ in range(rows[j])], gathered
    assert total.numpy() == sum(j * rows[j] for j in range(n)), total
for step in range(50):  # the same trace many times
    gathered, total = gather_fn(tf.fill([2], 1.0))
assert total.numpy() == 2.0 * n


@tf.function(autograph=False)
def named(x):
    a = hvd.allreduce(x, name="explicit.sum", op=hvd.Sum)
    b = hvd.allreduce(x, name="explicit.max", op=hvd.Max)
    return a, b


for _ in range(3):
    a, bb = named(tf.constant([float(r)]))
    assert a.numpy().tolist() == [n * (n - 1) / 2] and bb.numpy().tolist() == [n - 1.0]



# separate collectives in one tf.function run concurrently (not in program order), so the
# core can fuse them
@tf.function(autograph=False)
def separate_allreduces(x):
    return [hvd.allreduce(x * k, op=hvd.Sum) for k in range(8)]


assert tfring._tensorflow._loader.ops_are_unordered()
before = tfring.stats()["fused_tensors"]
for _ in range(3):
    outs = separate_allreduces(tf.ones([4]))
assert [o.numpy()[0] for o in outs] == [k * n for k in range(8)]
assert tfring.stats()["fused_tensors"] > before, tfring.stats()

# ---------------------------------------------------------------- variables, objects, barrier
vs = [tf.Variable(np.full((2, 2), r, np.float32)), tf.Variable(r, dtype=tf.int64),
      tf.Variable(np.full(3, r, np.float32)), tf.Variable([r % 2 == 0])]
hvd.broadcast_variables(vs, root_rank=n - 1)
assert vs[0].numpy().tolist() == [[n - 1.0] * 2] * 2 and vs[1].numpy() == n - 1
assert vs[2].numpy().tolist() == [n - 1.0] * 3 and vs[3].numpy().tolist() == [(n - 1) % 2 == 0]
obj = hvd.broadcast_object({"from": r, "list": [1, 2]} if r == 1 else None, root_rank=1)
assert obj == {"from": 1, "list": [1, 2]}, obj
assert hvd.allgather_object(("r", r)) == [("r", j) for j in range(n)]
assert hvd.allgather_object(None, name="nothing") == [None] * n
hvd.barrier()


@tf.function(autograph=False)
def barrier_in_function():
    hvd.barrier()  # no output: runs through tf.function's automatic control dependencies


barrier_in_function()

# ---------------------------------------------------------------- tf.compat.v1 graph and session
with tf.Graph().as_default():
    v1 = tf.compat.v1.get_variable("v1", initializer=tf.constant([float(r), 1.0]))
    summed = hvd.allreduce(v1.read_value(), op=hvd.Sum)
    gathered = hvd.allgather(tf.reshape(v1.read_value(), [1, 2]))
    bcast = hvd.broadcast_global_variables(0)
    with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        for _ in range(2):
            s, g = sess.run([summed, gathered])
            assert s.tolist() == [n * (n - 1) / 2, float(n)] and g.shape == (n, 2)
        sess.run(bcast)
        assert sess.run(v1).tolist() == [0.0, 1.0]

print(f"rank {r}: tf collectives OK", flush=True)
