"""Worker for tests/test_adasum.py through the NumPy API (no TensorFlow: cheap at 4 ranks).
A power-of-two world: values against the float64 reference for every float dtype, fused
tensors each with its own coefficients, the same bytes on every rank, pre/postscale, a
joined rank (its zeros change nothing), and the refusals. Other worlds: the refusal naming
the size. Prints "rank R: adasum numpy OK"."""

import numpy as np

import tfring
from tests.workers.adasum_reference import assert_close, rank_input, tree
from tfring import _errors as errors

tfring.init()
r, n = tfring.rank(), tfring.size()
RTOL = {np.float16: 1e-2, np.float32: 1e-5, np.float64: 1e-12}

if n & (n - 1):
    try:
        tfring.allreduce(np.ones(4, np.float32), op=tfring.Adasum, name="three")
    except errors.UnimplementedError as e:
        assert f"this job has {n}" in str(e) and "power-of-two" in str(e) and "op=Average" in str(e), e
        assert "'three'" in str(e) and f"rank {r}" in str(e), e
    else:
        raise AssertionError(f"rank {r}: Adasum on {n} ranks was not refused")
    tfring.barrier()  # the job is still healthy after the refusal
    print(f"rank {r}: adasum numpy OK", flush=True)
    raise SystemExit(0)

# One tensor per dtype, in several shapes (0 elements included).
for dtype, rtol in RTOL.items():
    for shape in [(0,), (1,), (7,), (3, 5), (1000,)]:
        x = rank_input(r, shape).astype(dtype)
        want = tree([rank_input(j, shape).astype(dtype) for j in range(n)])
        got = tfring.allreduce(x, op=tfring.Adasum)
        assert got.dtype == dtype and got.shape == shape
        assert_close(f"{dtype.__name__} {shape}", got, want, rtol)
        every = tfring.allgather(got.reshape(1, -1).view(np.uint8))
        assert all((row == every[0]).all() for row in every), f"rank {r}: ranks differ"

# Fused: several tensors in flight at once are reduced together, each on its own. Tensor 1
# is the same on every rank (its Adasum is itself), tensor 0 differs.
handles, wants = [], []
for k, shape in enumerate([(6,), (4,), (9,)]):
    same = k == 1
    x = rank_input(0 if same else r, shape, salt=k)
    wants.append(tree([rank_input(0 if same else j, shape, salt=k) for j in range(n)]))
    handles.append(tfring.allreduce_async(x, op=tfring.Adasum, name=f"fused.{k}"))
for k, (h, want) in enumerate(zip(handles, wants)):
    assert_close(f"fused tensor {k}", h.wait(), want, 1e-12)
assert_close("an equal tensor is its own Adasum", wants[1], rank_input(0, (4,), salt=1), 1e-12)

# prescale multiplies every input (Adasum is homogeneous: the result scales too), postscale
# the result; no division by the size.
x = rank_input(r, (5,))
want = tree([rank_input(j, (5,)) for j in range(n)])
assert_close("scaled", tfring.allreduce(x, op=tfring.Adasum, prescale_factor=2.0, postscale_factor=0.25),
             want * 0.5, 1e-12)

# Refusals, with the reason.
for bad, needle in [(lambda: tfring.allreduce(np.ones(3, np.int32), op=tfring.Adasum), "int32"),
                    (lambda: tfring.reducescatter(np.ones((n, 2)), op=tfring.Adasum), "allreduce only")]:
    try:
        bad()
    except errors.UnimplementedError as e:
        assert needle in str(e), e
    else:
        raise AssertionError(f"rank {r}: not refused: {needle}")

# The last rank joins early: it adds zeros, which leave the others' Adasum unchanged.
if r == n - 1:
    last = tfring.join()
else:
    x = rank_input(r, (8,))
    got = tfring.allreduce(x, op=tfring.Adasum, name="after_join")
    assert_close("with a joined rank", got, tree([rank_input(j, (8,)) for j in range(n - 1)] + [np.zeros(8)]), 1e-12)
    last = tfring.join()
assert 0 <= last < n, last
print(f"rank {r}: adasum numpy OK", flush=True)
