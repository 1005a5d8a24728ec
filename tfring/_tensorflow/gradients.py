"""Gradients of every tfring op (registered with TensorFlow on import).

Notation: rank i holds x_i, upstream gradient g_i; S(.) is a Sum allreduce, A(.) an
Average allreduce, n the world size.

Reductions (the mathematical gradient, the same as Horovod for Sum/Average):

- Allreduce Sum/Average, y = post * reduce_j(pre * x_j): dL/dx_i = sum_j g_j * pre * post
  (/ n for Average) = the same allreduce of g with the same op and scales.
- Allreduce Min/Max: the gradient goes to the rank(s) holding the extremum, shared equally
  among ties (like tf.reduce_max): S(g) * pre * post * [x_i is extreme] / (#ties). The
  inputs are allgathered so every rank sees the same comparison. (Horovod returns the
  Min/Max allreduce of g here, which is not a gradient; docs/tensorflow.md lists this.)
- Allreduce Product: S(g) * pre * post * prod_{j != i}(pre * x_j) (exact with zeros).
- Allreduce Adasum: the Adasum allreduce of g with the same scales, Horovod's convention
  (its ``_allreduce_grad`` repeats the op). Adasum is not linear, so this is not its exact
  Jacobian; it is what Horovod code expects (docs/tensorflow.md "Adasum").
- Alltoall: alltoall of g with the received splits (rows go back where they came from).

Data movement, Horovod's convention (its PR #2687; docs/tensorflow.md derives it):

- Allgather: A(g), then this rank's rows. With every rank's loss L_j, this is the gradient
  of the loss averaged over ranks, (1/n) sum_j L_j, with respect to x_i.
- Broadcast: A(g) on the root, A(g) * 0 elsewhere. The product keeps the allreduce in the
  graph of every rank: a non-root rank that returned zeros_like would never run it, and
  in graph mode the root would wait for it forever.
- Reducescatter: allgather of g, times n for Sum (Average: g as is). Like Horovod's, the
  pre/post scale factors are not applied to the gradient.

On a process set (the op's ``process_set_id``), every gradient runs on the same set, with n
its size and ranks its members' indices.

Gradient ops are unnamed: they take graph names (``.../TfringAllreduce_grad/...``) or eager
counters, like any other op (see ``naming``).
"""

import tensorflow as tf

from tfring._basics import basics
from tfring._tensorflow import mpi_ops


def _dense(grad, like):
    if grad is None:
        return tf.zeros_like(like)
    return tf.convert_to_tensor(grad)


def _set(op):
    return op.get_attr("process_set_id")


def _extremum_or_product_grad(x, grad, reduce_op, pre, post, ps):
    """Gradient of y = post * reduce_j(pre * x_j) w.r.t. this rank's x for Min/Max/Product."""
    summed = mpi_ops._allreduce(grad, mpi_ops.Sum, process_set_id=ps)
    scaled = mpi_ops._allgather(tf.expand_dims(x, 0), process_set_id=ps) * tf.cast(pre, x.dtype)  # [size, ...]
    rank = mpi_ops.set_rank(ps)
    if reduce_op == mpi_ops.Product:
        others = tf.reduce_prod(tf.concat([scaled[:rank], scaled[rank + 1:]], axis=0), axis=0)
        local = others * tf.cast(pre * post, x.dtype)
    else:
        extreme = (tf.reduce_min if reduce_op == mpi_ops.Min else tf.reduce_max)(scaled, axis=0)
        hits = tf.cast(tf.equal(scaled, extreme), x.dtype)
        local = hits[rank] / tf.reduce_sum(hits, axis=0) * tf.cast(pre * post, x.dtype)
    return summed * local


# Reduce ops whose gradient is the same allreduce of the upstream gradient: exact for Sum and
# Average (linear); Horovod's convention for Adasum, which is not linear (module docstring).
_SELF_GRADIENT_OPS = (mpi_ops.Sum, mpi_ops.Average, mpi_ops.Adasum)


def _allreduce_like_grad(op, x, grad, reduce_op):
    if reduce_op in _SELF_GRADIENT_OPS:
        return None  # handled by the caller (one allreduce or one group)
    return _extremum_or_product_grad(x, grad, reduce_op, float(op.get_attr("prescale_factor")),
                                     float(op.get_attr("postscale_factor")), _set(op))


@tf.RegisterGradient("TfringAllreduce")
def _allreduce_grad(op, grad):
    reduce_op = op.get_attr("reduce_op")
    grad = _dense(grad, op.outputs[0])
    if reduce_op in _SELF_GRADIENT_OPS:
        return mpi_ops._allreduce(grad, reduce_op, op.get_attr("prescale_factor"),
                                  op.get_attr("postscale_factor"), process_set_id=_set(op))
    return _allreduce_like_grad(op, op.inputs[0], grad, reduce_op)


@tf.RegisterGradient("TfringGroupedAllreduce")
def _grouped_allreduce_grad(op, *grads):
    reduce_op = op.get_attr("reduce_op")
    grads = [_dense(g, y) for g, y in zip(grads, op.outputs)]
    if reduce_op in _SELF_GRADIENT_OPS:
        return mpi_ops._grouped_allreduce(grads, reduce_op, op.get_attr("prescale_factor"),
                                          op.get_attr("postscale_factor"), process_set_id=_set(op))
    return [_allreduce_like_grad(op, x, g, reduce_op) for x, g in zip(op.inputs, grads)]


@tf.RegisterGradient("TfringAllgather")
def _allgather_grad(op, grad):
    x, ps = op.inputs[0], _set(op)
    averaged = mpi_ops._allreduce(_dense(grad, op.outputs[0]), mpi_ops.Average, process_set_id=ps)
    rows = mpi_ops._allgather(tf.reshape(tf.shape(x, out_type=tf.int64)[0], [1]), process_set_id=ps)
    me = mpi_ops.set_rank(ps)
    start = tf.reduce_sum(rows[:me])
    return averaged[start : start + rows[me]]


@tf.RegisterGradient("TfringBroadcast")
def _broadcast_grad(op, grad):
    averaged = mpi_ops._allreduce(_dense(grad, op.outputs[0]), mpi_ops.Average, process_set_id=_set(op))
    if basics.rank() == op.get_attr("root_rank"):  # a global rank, also on a process set
        return averaged
    return averaged * tf.zeros([], averaged.dtype)  # depends on the allreduce: it runs here too


@tf.RegisterGradient("TfringAlltoall")
def _alltoall_grad(op, grad, grad_splits):
    returned, _ = mpi_ops._alltoall(_dense(grad, op.outputs[0]), splits=op.outputs[1], process_set_id=_set(op))
    return [returned, None]


@tf.RegisterGradient("TfringReducescatter")
def _reducescatter_grad(op, grad):
    reduce_op = op.get_attr("reduce_op")
    if reduce_op not in (mpi_ops.Sum, mpi_ops.Average):
        raise NotImplementedError("tfring has no gradient for reducescatter with Min/Max/Product; "
                                  "use Sum or Average")
    grad, ps = _dense(grad, op.outputs[0]), _set(op)
    if reduce_op == mpi_ops.Sum:
        grad = grad * tf.cast(mpi_ops.set_size(ps), grad.dtype)
    return mpi_ops._allgather(grad, process_set_id=ps)


tf.no_gradient("TfringBarrier")
tf.no_gradient("TfringJoin")
