"""NumPy reference of Horovod's Adasum (docs/tensorflow.md "Adasum"), shared by the Adasum
workers: the pairwise formula in float64 applied as a binary tree over the ranks."""

import numpy as np

MIN_NORM_SQ = 1e-8  # below it a vector's coefficient is 1 (Horovod's threshold)


def combine(a, b):
    """adasum(a, b) = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b, in float64."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    dot, aa, bb = float(np.vdot(a, b)), float(np.vdot(a, a)), float(np.vdot(b, b))
    ca = 1.0 - dot / (2 * aa) if aa >= MIN_NORM_SQ else 1.0
    cb = 1.0 - dot / (2 * bb) if bb >= MIN_NORM_SQ else 1.0
    return ca * a + cb * b


def tree(vectors):
    """adasum(adasum(v0, v1), adasum(v2, v3)) ... over a power-of-two number of vectors."""
    level = [np.asarray(v, np.float64) for v in vectors]
    assert len(level) & (len(level) - 1) == 0, "a power of two"
    while len(level) > 1:
        level = [combine(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]


def rank_input(rank, shape, salt=0):
    """Rank ``rank``'s input: reproducible on every rank, so each can compute the reference."""
    return np.random.default_rng(1000 * salt + rank).uniform(-1, 1, shape)


def assert_close(label, got, want, rtol):
    """|got - want| <= rtol * the largest magnitude of ``want`` (Adasum cancels)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = max(float(np.max(np.abs(want), initial=0.0)), 1e-30)
    if got.shape != want.shape or np.max(np.abs(got - want), initial=0.0) > rtol * scale:
        raise AssertionError(f"{label}: got {got.tolist()}, want {want.tolist()}")
