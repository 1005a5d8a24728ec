"""Spawners start one worker process for a slot of the plan: ``LocalSpawner`` here for this
machine, ``remote.RemoteSpawner`` for other hosts (ssh or ``--remote-command``), both with
``spawn(command, env)``; placement.py picks one per host.

Each worker runs in a new session, so its process group id is its pid and the launcher can
signal the worker together with everything it started (``os.killpg``). On Linux a worker
also gets SIGKILL if the launcher dies without cleaning up (``PR_SET_PDEATHSIG``), so a
``kill -9`` of tfringrun leaves no rank running on. Where the launcher binds ranks to CPUs
(``--bind-to``, binding.py), the same hook sets the worker's affinity before exec.
"""

import ctypes
import os
import signal
import subprocess
import sys

from tfring._runner import binding

_PR_SET_PDEATHSIG = 1


def die_with_launcher_hook(cpus=None):
    """A preexec_fn that sets PR_SET_PDEATHSIG and, given ``cpus``, the CPU affinity; None
    where neither applies.

    The hook only calls prctl, getppid and sched_setaffinity (plain system calls, no locks)
    between fork and exec. Spawn from the main thread: the death signal fires when the
    forking *thread* exits.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        prctl = None
    if prctl is None and not cpus:
        return None
    launcher = os.getpid()

    def hook():
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
            if os.getppid() != launcher:  # the launcher died before prctl took effect
                os._exit(1)
        if cpus:
            os.sched_setaffinity(0, cpus)

    return hook


def worker_preexec(env):
    """The preexec_fn for the worker whose environment is ``env``: dies with its parent, and
    runs on the CPUs ``binding.cpus_from_env`` gives (computed here, before the fork)."""
    return die_with_launcher_hook(binding.cpus_from_env(env))


class LocalSpawner:
    """Starts workers on this machine."""

    def spawn(self, command, env):
        """Starts ``command`` (argv list) with environment ``env``; stdin is /dev/null and
        stdout/stderr are pipes (binary). Returns the ``subprocess.Popen``.

        Raises:
          OSError: the command cannot be started (not found, not executable).
        """
        return subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True, close_fds=True,
                                preexec_fn=worker_preexec(env))  # noqa: PLW1509 - the hook takes no locks

