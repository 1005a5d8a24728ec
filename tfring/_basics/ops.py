"""Collectives on NumPy arrays (host memory), without TensorFlow.

Every function has a blocking form and an ``*_async`` form returning a handle whose
``wait(timeout=None)`` gives the result. Names are the negotiation keys: equal on every
rank for the same collective, distinct while in flight. When ``name`` is omitted, the
n-th unnamed call of an op on this process is called ``"<op>.<n>"``, which matches across
ranks as long as every rank makes its unnamed calls in the same order; pass explicit names
when they may not (e.g. from several threads).

Every argument after the array (and after ``root_rank`` for broadcast) is keyword-only:
``allreduce(x, Max)`` would read like Horovod's deprecated ``allreduce(x, average)``, so it
is refused instead of guessed.
"""

from tfring import _core
from tfring._basics import auto_names
from tfring._basics.process_sets import resolve as _set_id

# Reduce ops: the core's ReduceOp values, by name (shared with tfring.tensorflow).
_REDUCE_OPS = _core.reduce_ops()
Sum = _REDUCE_OPS["Sum"]
Average = _REDUCE_OPS["Average"]
Min = _REDUCE_OPS["Min"]
Max = _REDUCE_OPS["Max"]
Product = _REDUCE_OPS["Product"]
# Horovod's adaptive summation (docs/tensorflow.md "Adasum"): allreduce of float arrays only,
# a power-of-two number of ranks; the core refuses anything else with the reason.
Adasum = _REDUCE_OPS["Adasum"]

def _auto_name(op, name, set_id=0):
    """``name`` or the next automatic one; calls on a process set count apart
    (``"allreduce.ps1.0"``), since only its members make them."""
    if name is not None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty string. Received: {name!r}")
        return name
    return auto_names.next_name(op if set_id == 0 else f"{op}.ps{set_id}")


def _check_op(op):
    if isinstance(op, bool) or op not in (Sum, Average, Min, Max, Product, Adasum):
        raise ValueError(f"op must be one of tfring.Sum, Average, Min, Max, Product, Adasum. Received: {op!r}")
    return op


def allreduce_async(array, *, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0, out=None,
                    process_set=None):
    ps = _set_id(process_set)
    return _core.allreduce_async(array, _auto_name("allreduce", name, ps), _check_op(op),
                                 float(prescale_factor), float(postscale_factor), out=out, process_set_id=ps)


def allreduce(array, *, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0, out=None,
              process_set=None):
    """Reduces ``array`` across ranks; every rank gets the result (a new array, or ``out``).

    ``op=Average`` divides the sum by the world size (integers truncate toward zero).
    ``op=Adasum`` combines the arrays pairwise by Horovod's adaptive summation (float arrays,
    a power-of-two number of ranks; otherwise ``UnimplementedError``).
    ``prescale_factor`` multiplies the input before the reduction, ``postscale_factor`` the
    result after it. ``out``: a preallocated writeable C-contiguous array of the same shape
    and dtype that receives the result (and is returned), or ``array`` itself to reduce in
    place; it saves allocating and page-faulting a new array per call (a training loop
    reducing the same buffers every step). It must not be touched until the call returns
    (``*_async``: until ``wait()`` returns). For a GPU array (CuPy, a ``DeviceBuffer``...)
    ``out`` may only be ``array`` itself: reduced in place on the device.

    Every collective here takes ``process_set=`` (a registered ``ProcessSet``; None: every
    rank): only the set's members call it, ranks and sizes are the set's (Average divides by
    the set's size), and it fails with ``InvalidArgumentError`` on a rank outside the set,
    ``ValueError`` for an unregistered set (``tfring._basics.process_sets``).
    """
    return allreduce_async(array, op=op, name=name, prescale_factor=prescale_factor,
                           postscale_factor=postscale_factor, out=out, process_set=process_set).wait()


def allgather_async(array, *, name=None, process_set=None):
    ps = _set_id(process_set)
    return _core.allgather_async(array, _auto_name("allgather", name, ps), process_set_id=ps)


def allgather(array, *, name=None, process_set=None):
    """Concatenates every rank's array along the first dimension, in rank order. The first
    dimension may differ between ranks; the others must match."""
    return allgather_async(array, name=name, process_set=process_set).wait()


def broadcast_async(array, root_rank, *, name=None, out=None, process_set=None):
    ps = _set_id(process_set)
    return _core.broadcast_async(array, int(root_rank), _auto_name("broadcast", name, ps), out=out,
                                 process_set_id=ps)


def broadcast(array, root_rank, *, name=None, out=None, process_set=None):
    """Returns ``root_rank``'s array on every rank (same shape and dtype on every rank).
    ``out``: as for :func:`allreduce` (a preallocated result array, or ``array`` itself).
    With ``process_set``, ``root_rank`` is still a global rank, and must be in the set."""
    return broadcast_async(array, root_rank, name=name, out=out, process_set=process_set).wait()


def alltoall_async(array, *, splits=None, name=None, process_set=None):
    if splits is not None:
        splits = [int(s) for s in splits]
    ps = _set_id(process_set)
    return _core.alltoall_async(array, splits, _auto_name("alltoall", name, ps), process_set_id=ps)


def alltoall(array, *, splits=None, name=None, process_set=None):
    """Sends ``splits[j]`` rows of ``array`` (in order) to rank j and returns
    ``(received, received_splits)``: the rows from every rank concatenated in rank order,
    and how many came from each. ``splits=None`` divides the first dimension evenly.
    With ``process_set``, j indexes the set's members."""
    return alltoall_async(array, splits=splits, name=name, process_set=process_set).wait()


def reducescatter_async(array, *, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
                        process_set=None):
    ps = _set_id(process_set)
    return _core.reducescatter_async(array, _auto_name("reducescatter", name, ps), _check_op(op),
                                     float(prescale_factor), float(postscale_factor), process_set_id=ps)


def reducescatter(array, *, op=Average, name=None, prescale_factor=1.0, postscale_factor=1.0,
                  process_set=None):
    """Reduces across ranks and returns this rank's block of rows: the first dimension is
    split as evenly as possible, lower ranks getting one extra row when it does not divide."""
    return reducescatter_async(array, op=op, name=name, prescale_factor=prescale_factor,
                               postscale_factor=postscale_factor, process_set=process_set).wait()


def barrier(name=None, *, timeout=None):
    """Returns once every rank has entered the barrier of this name."""
    _core.barrier_async(_auto_name("barrier", name)).wait(timeout)


def join(name=None):
    """This rank has no more data (uneven shards): until every rank has joined, it adds zeros
    to the allreduces the other ranks still run. Blocks until every rank has joined and
    returns the last rank to join. Only allreduce and barrier can run while some rank has
    joined; anything else fails with ``PreconditionError`` naming the joined ranks."""
    return int(_core.join_async(_auto_name("join", name)).wait())

