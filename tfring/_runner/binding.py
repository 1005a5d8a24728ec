"""Which CPUs each local rank runs on (``tfringrun --bind-to``), like mpirun's binding.

Unbound, the ranks of a host and their TensorFlow thread pools float over every CPU; the
kernel then often stacks two ranks' busy threads on one core while another idles.
Measured on a 2-core VM, Keras ``fit`` at np=2 ran at 7.8k or 15.5k samples/s from one
launch to the next; bound to a core each, 15.5k every time (docs/launcher.md).

Modes:
- ``core`` (default): the CPUs this launcher may use (its affinity mask: a container's,
  Slurm's or ``taskset``'s) are split into ``local_size`` contiguous shares, whole cores
  kept together (hyperthread siblings stay in one share), NUMA nodes filled in order; a
  host with fewer cores than local ranks is not bound (ranks would share cores anyway).
- ``socket`` / ``numa``: each rank gets every allowed CPU of one socket / NUMA node, ranks
  spread over them in order (rank i on node i * nodes // local_size).
- ``none``: no binding.

TensorFlow sizes its thread pools from the process's affinity mask, so a bound rank's
intra-op pool matches its share without any setting. The binding is applied between fork
and exec of the worker (``spawn.worker_preexec``), so every thread of the worker has it.
Pure functions over a ``Topology``; ``Topology.here()`` reads /sys (Linux).
"""

import dataclasses
import os

MODES = ("core", "socket", "numa", "none")
ENV = "TFRINGRUN_BIND_TO"  # how the launcher tells a remote bootstrap the mode


@dataclasses.dataclass(frozen=True)
class Topology:
    """The allowed CPUs with the core, socket and NUMA node of each (-1 when unknown)."""

    cpus: tuple
    core_of: dict
    socket_of: dict
    node_of: dict

    @staticmethod
    def here():
        """This machine, restricted to this process's affinity mask."""
        allowed = allowed_cpus()
        core_of, socket_of, node_of = {}, {}, {}
        for cpu in allowed:
            base = f"/sys/devices/system/cpu/cpu{cpu}"
            socket_of[cpu] = _read_int(f"{base}/topology/physical_package_id")
            core_of[cpu] = (socket_of[cpu], _read_int(f"{base}/topology/core_id"))
            node_of[cpu] = next((int(name[4:]) for name in _listdir(base) if name.startswith("node")
                                 and name[4:].isdigit()), -1)
        return Topology(tuple(allowed), core_of, socket_of, node_of)


def allowed_cpus():
    """The CPUs this process may run on (its affinity mask), sorted; every CPU where the
    platform has no affinity masks."""
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))


def cpu_count():
    """How many CPUs this process may run on (``allowed_cpus``)."""
    return len(allowed_cpus())


def oversubscription_warning(local_ranks, cpus):
    """The launcher's warning when it starts more ranks on this host than ``cpus``, else
    None. Said once per job (launch.py), not by every rank."""
    if local_ranks <= cpus:
        return None
    return (f"warning: {local_ranks} ranks on this host, which has {cpus} CPU{'s' if cpus != 1 else ''} for them "
            "(this process's affinity mask): the ranks will share cores and run slower. For a CPU each, start "
            f"at most {cpus} here (tfringrun -np {cpus}, tfring.run(np={cpus}), or add hosts); to keep "
            f"{local_ranks} and hide this warning, set TFRING_LOG_LEVEL=warning,cpu=error (or --log-level "
            "warning,cpu=error)")


def _read_int(path):
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return -1


def _listdir(path):
    try:
        return os.listdir(path)
    except OSError:
        return []


def cpus_for(mode, local_rank, local_size, topology):
    """The set of CPUs for ``local_rank`` of ``local_size`` ranks on a host, or None for no
    binding (mode ``none``, one CPU group per rank impossible, or unknown topology).

    Raises:
      ValueError: unknown mode.
    """
    if mode not in MODES:
        raise ValueError(f"--bind-to must be one of {', '.join(MODES)}. Received: {mode!r}")
    if mode == "none" or not topology.cpus or not 0 <= local_rank < local_size:
        return None
    if mode == "core":
        # whole cores in (node, socket, core) order, each with its hyperthread siblings
        cores = {}
        for cpu in topology.cpus:
            key = (topology.node_of[cpu], topology.core_of[cpu]) if topology.core_of[cpu][1] >= 0 else (cpu,)
            cores.setdefault(key, []).append(cpu)
        groups = [cores[k] for k in sorted(cores)]
        if len(groups) < local_size:
            return None
        lo, hi = local_rank * len(groups) // local_size, (local_rank + 1) * len(groups) // local_size
        return frozenset(cpu for g in groups[lo:hi] for cpu in g)
    key_of = topology.socket_of if mode == "socket" else topology.node_of
    keys = sorted({key_of[c] for c in topology.cpus})
    if keys == [-1]:
        return None
    chosen = keys[local_rank * len(keys) // local_size]
    return frozenset(c for c in topology.cpus if key_of[c] == chosen)


def cpus_from_env(env, topology=None):
    """The binding of the worker whose environment is ``env`` (``TFRINGRUN_BIND_TO``,
    ``TFRING_LOCAL_RANK``, ``TFRING_LOCAL_SIZE``), or None."""
    mode = env.get(ENV, "none")
    try:
        local_rank, local_size = int(env["TFRING_LOCAL_RANK"]), int(env["TFRING_LOCAL_SIZE"])
    except (KeyError, ValueError):
        return None
    return cpus_for(mode, local_rank, local_size, topology or Topology.here())


def describe(cpus):
    """'0-3,8' for a set of CPUs (as taskset -c)."""
    if not cpus:
        return "all CPUs"
    out, run = [], []
    for c in sorted(cpus):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)
