// Adasum: Horovod's adaptive summation (op=hvd.Adasum; Maleki et al., "Scaling Distributed
// Training with Adaptive Summation", MLSys 2021), on host memory.
//
// Two vectors combine as
//     adasum(a, b) = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b
// (a sum for orthogonal vectors, an average for equal ones), where a coefficient is 1 when
// its squared norm is below kAdasumMinNormSq (Horovod's rule, which makes a zero vector,
// e.g. a joined rank's, the identity). The ranks combine as a binary tree: level 1 pairs
// rank r with r ^ 1, level 2 the results of {0,1} with {2,3}, and so on, i.e. for 4 ranks
//     adasum(adasum(x0, x1), adasum(x2, x3)).
// Dot products and norms are of whole tensors: in a fused buffer each tensor has its own
// coefficients. Algorithm and bytes on the wire: adasum.cc.
//
// Rules (Horovod's CPU ones): a power-of-two number of ranks; float16, bfloat16, float32 and
// float64 only; an allreduce only (no reducescatter); host memory only (the NCCL backend
// refuses it). CheckAdasum() states them; enqueue-time validation calls it.
// Thread-safety: AdasumAllreduce is a collective (contract of collectives.h; the CPU
// backend runs it through RunCollective as allreduce's kAdasum); the others are pure
// functions.
#pragma once

#include <cstddef>
#include <vector>

#include "base/data_type.h"
#include "base/status.h"
#include "collectives/collective_args.h"

namespace tfring {

// Below this squared norm a vector's coefficient is 1 (Horovod's threshold).
constexpr double kAdasumMinNormSq = 1e-8;

// kUnimplemented, saying why and what to do instead, when a request for `op` (a collective)
// on `dtype` (in GPU memory: `on_gpu`) cannot use Adasum in a job of `world_size` ranks;
// OK otherwise.
Status CheckAdasum(OpType op, DataType dtype, int world_size, bool on_gpu);

// The coefficient of vector a in adasum(a, b): 1 - dot / (2 anorm_sq), or 1 when
// anorm_sq < kAdasumMinNormSq.
double AdasumCoefficient(double dot, double anorm_sq);

// In-place Adasum allreduce of `output`, which holds tensor_counts->size() tensors of
// `dtype` back to back (tensor_counts[t] elements each, any of them 0; `count` in all),
// then multiplied by `postscale` (ScaleInPlace rules). Every rank passes the same counts
// and ends with bitwise identical contents. kUnimplemented for a world size that is not a
// power of two (CheckAdasum refuses those requests before they get here).
Status AdasumAllreduce(const CollectiveArgs& args);

}  // namespace tfring
