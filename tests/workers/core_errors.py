"""Worker: every cross-rank mismatch and local argument error raises the right class with a
message that names the tensor and the ranks, on every rank, and the next op still works."""

import numpy as np

import tfring
from tfring import _errors as errors

tfring.init()
r, n = tfring.rank(), tfring.size()


def expect(exc_class, fn, *needles):
    try:
        fn()
    except exc_class as e:
        message = str(e)
        for needle in needles:
            assert needle in message, f"{needle!r} not in {message!r}"
    else:
        raise AssertionError(f"expected {exc_class.__name__}")
    # the job goes on: a valid collective right after the error works
    assert tfring.allreduce(np.ones(3, np.float32), op=tfring.Sum).tolist() == [n] * 3


# shape differs on the last rank
shape = (3,) if r != n - 1 else (4,)
expect(errors.MismatchError, lambda: tfring.allreduce(np.ones(shape, np.float32), name="bad_shape"),
       "bad_shape", "shape", "[3]", "[4]", f"rank {n - 1}")
# dtype differs
dtype = np.float32 if r == 0 else np.float64
expect(errors.MismatchError, lambda: tfring.allreduce(np.ones(2, dtype), name="bad_dtype"),
       "bad_dtype", "dtype", "float32", "float64")
# reduce op differs
op = tfring.Sum if r == 0 else tfring.Max
expect(errors.MismatchError, lambda: tfring.allreduce(np.ones(2, np.float32), op=op, name="bad_op"),
       "bad_op", "reduce op", "Sum", "Max")
# broadcast root differs
expect(errors.MismatchError, lambda: tfring.broadcast(np.ones(2), root_rank=0 if r == 0 else 1, name="bad_root"),
       "bad_root", "root")
# different collectives under one name
expect(errors.MismatchError,
       lambda: (tfring.allreduce if r == 0 else tfring.allgather)(np.ones(2, np.float32), name="bad_kind"),
       "bad_kind", "operation")
# allgather with a different trailing shape
expect(errors.MismatchError, lambda: tfring.allgather(np.ones((1, 2 + (r == 1))), name="bad_tail"),
       "bad_tail", "after the first dimension")
# local argument errors: raised at once on the calling rank
expect(errors.InvalidArgumentError, lambda: tfring.broadcast(np.ones(2), root_rank=n, name="oob"),
       "root_rank", "out of range")
expect(errors.InvalidArgumentError, lambda: tfring.alltoall(np.ones(5), splits=[5] + [1] * (n - 1)),
       "splits sum to")
expect(errors.InvalidArgumentError, lambda: tfring.alltoall(np.ones(4), splits=[4]), "entries")
expect(errors.InvalidArgumentError, lambda: tfring.alltoall(np.ones(4), splits=[-1] + [5 // max(n - 1, 1)] * (n - 1)),
       "negative")
expect(errors.InvalidArgumentError, lambda: tfring.allreduce(np.ones((4, 4))[:, ::2], name="strided"),
       "C-contiguous")
expect(errors.UnimplementedError, lambda: tfring.allreduce(np.ones(2, np.complex64), name="complex"), "complex64")
expect(errors.UnimplementedError, lambda: tfring.allreduce(np.ones(2, bool), op=tfring.Average, name="bavg"),
       "bool")
expect(ValueError, lambda: tfring.allreduce(np.ones(2), op=42), "op must be")


# duplicate in-flight name: the second submission fails at once
def duplicate():
    first = tfring.allreduce_async(np.ones(2, np.float32), name="dup")
    try:
        tfring.allreduce_async(np.ones(2, np.float32), name="dup")
    finally:
        first.wait(timeout=30)


expect(errors.InvalidArgumentError, duplicate, "dup", "already in flight")

# ranks may submit in different orders
names = [f"order.{i}" for i in range(6)]
order = names if r % 2 == 0 else names[::-1]
handles = {nm: tfring.allreduce_async(np.full(3, i, np.float32), op=tfring.Sum, name=nm)
           for i, nm in zip(range(6) if r % 2 == 0 else range(5, -1, -1), order)}
for i, nm in enumerate(names):
    assert handles[nm].wait(timeout=30).tolist() == [i * n] * 3

# many small tensors submitted at once are fused
before = tfring.stats()["fused_tensors"]
hs = [tfring.allreduce_async(np.full(10, k, np.float32), op=tfring.Sum, name=f"fuse.{k}") for k in range(40)]
for k, h in enumerate(hs):
    assert h.wait(timeout=30).tolist() == [k * n] * 10
assert tfring.stats()["fused_tensors"] > before, tfring.stats()

# prescale / postscale
got = tfring.allreduce(np.full(4, 2.0), op=tfring.Sum, prescale_factor=0.5, postscale_factor=3.0, name="scaled")
assert np.allclose(got, 3.0 * n), got

# fused tensors keep their own scale factors, even two that print alike at six digits (the
# fusion key was once their text: half of these got the other factor)
before = tfring.stats()["fused_tensors"]
factors = [1.000001 if k % 2 == 0 else 1.000004 for k in range(40)]
hs = [tfring.allreduce_async(np.full(10, 1e6, np.float32), op=tfring.Sum, prescale_factor=f, name=f"scale.{k}")
      for k, f in enumerate(factors)]
for k, (h, f) in enumerate(zip(hs, factors)):
    got = h.wait(timeout=30)
    assert np.allclose(got, n * 1e6 * f, rtol=0, atol=1.0), (k, f, got[0], n * 1e6 * f)
assert tfring.stats()["fused_tensors"] > before, tfring.stats()

# init twice with new settings is refused; without new settings it is a no-op
tfring.init()
try:
    tfring.init(cycle_time_ms=5)
except errors.PreconditionError as e:
    assert "already initialized" in str(e)
else:
    raise AssertionError("init with new settings while initialized must fail")

print(f"rank {r}: errors OK", flush=True)
tfring.shutdown()
try:
    tfring.allreduce(np.ones(1))
except errors.PreconditionError as e:
    assert "not initialized" in str(e)
else:
    raise AssertionError("use after shutdown must fail")
