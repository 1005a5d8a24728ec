"""tfringrun --bind-to: each local rank's CPU share (binding.py), pure planning on synthetic
topologies, and real workers whose affinity masks are read back."""

import ast
import os

import pytest

from tests.helpers import rank_output, run_job
from tfring._runner import binding


def topo(cpus, core=None, socket=None, node=None):
    """A topology of ``cpus`` with per-CPU core id, socket and node (defaults: a core per
    CPU, socket 0, node 0)."""
    core = core or {c: c for c in cpus}
    socket = socket or {c: 0 for c in cpus}
    node = node or {c: 0 for c in cpus}
    return binding.Topology(tuple(cpus), {c: (socket[c], core[c]) for c in cpus}, socket, node)


def plan(mode, local_size, t):
    return [binding.cpus_for(mode, r, local_size, t) for r in range(local_size)]


def test_core_splits_whole_cores_evenly():
    t = topo(range(8))
    assert plan("core", 2, t) == [frozenset({0, 1, 2, 3}), frozenset({4, 5, 6, 7})]
    assert plan("core", 3, t) == [frozenset({0, 1}), frozenset({2, 3, 4}), frozenset({5, 6, 7})]
    assert plan("core", 8, t) == [frozenset({c}) for c in range(8)]


def test_core_keeps_hyperthread_siblings_together():
    # 4 cores x 2 threads, Linux numbering: cpu c and c + 4 are siblings
    t = topo(range(8), core={c: c % 4 for c in range(8)})
    assert plan("core", 2, t) == [frozenset({0, 4, 1, 5}), frozenset({2, 6, 3, 7})]
    assert plan("core", 4, t) == [frozenset({c, c + 4}) for c in range(4)]


def test_core_fills_numa_nodes_in_order():
    node = {c: 0 if c in (0, 2, 4, 6) else 1 for c in range(8)}  # interleaved numbering
    t = topo(range(8), node=node)
    assert plan("core", 2, t) == [frozenset({0, 2, 4, 6}), frozenset({1, 3, 5, 7})]


def test_fewer_cores_than_ranks_is_not_bound():
    assert plan("core", 3, topo(range(2))) == [None, None, None]
    t = topo(range(4), core={c: c % 2 for c in range(4)})  # 2 cores, 4 threads
    assert plan("core", 3, t) == [None, None, None]


def test_the_launchers_own_mask_is_respected():
    t = topo([2, 3, 6, 7])  # e.g. taskset -c 2,3,6,7 or a container's cpuset
    assert plan("core", 2, t) == [frozenset({2, 3}), frozenset({6, 7})]


def test_socket_and_numa_modes_spread_ranks_over_them():
    socket = {c: c // 4 for c in range(8)}
    t = topo(range(8), socket=socket, node=socket)
    for mode in ("socket", "numa"):
        assert plan(mode, 2, t) == [frozenset({0, 1, 2, 3}), frozenset({4, 5, 6, 7})]
        assert plan(mode, 4, t) == [frozenset({0, 1, 2, 3})] * 2 + [frozenset({4, 5, 6, 7})] * 2
    assert plan("numa", 2, topo(range(4), node={c: -1 for c in range(4)})) == [None, None]


def test_none_and_bad_modes():
    assert plan("none", 2, topo(range(4))) == [None, None]
    with pytest.raises(ValueError, match="--bind-to must be one of core, socket, numa, none"):
        binding.cpus_for("cores", 0, 2, topo(range(4)))
    assert binding.describe(frozenset({0, 1, 2, 5, 7, 8})) == "0-2,5,7-8"


AFFINITY = """
import os, tfring
tfring.init()
print("AFF", sorted(os.sched_getaffinity(0)), flush=True)
"""


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="needs Linux affinity masks")
def test_workers_run_on_their_share():
    mine = sorted(os.sched_getaffinity(0))
    result = run_job(2, AFFINITY, timeout=45)
    got = [ast.literal_eval(rank_output(result.stdout, r).split("AFF ")[1]) for r in range(2)]
    if len(mine) >= 2:  # whole cores of this machine, split in two disjoint halves
        assert set(got[0]).isdisjoint(got[1]) and set(got[0]) | set(got[1]) <= set(mine), got
        assert got[0] and got[1]
    else:
        assert got == [mine, mine]
    result = run_job(2, AFFINITY, timeout=45, args=("--bind-to", "none"))
    assert [ast.literal_eval(rank_output(result.stdout, r).split("AFF ")[1]) for r in range(2)] == [mine, mine]


SPIN_CHECK = """
import tfring
tfring.init()
tfring.shutdown()
"""


@pytest.mark.multiprocess
@pytest.mark.timeout(90)
@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux affinity masks and two CPUs")
def test_ranks_bound_to_a_core_each_spin_and_outnumbered_cpus_do_not():
    """Each bound rank sees one CPU, but the host's ranks have one each between them: waits
    spin (8-byte allreduce 94 -> 26 us measured). Two ranks started on one CPU must not."""
    result = run_job(2, SPIN_CHECK, timeout=60, env={"TFRING_LOG_LEVEL": "info"})
    assert "waits do not spin" not in result.stdout + result.stderr
    mine = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(mine)})  # the launcher and its ranks inherit one CPU
    try:
        result = run_job(2, SPIN_CHECK, timeout=60, env={"TFRING_LOG_LEVEL": "info"})
    finally:
        os.sched_setaffinity(0, mine)
    assert "ranks on this machine share 1 CPUs: waits do not spin" in result.stdout + result.stderr
