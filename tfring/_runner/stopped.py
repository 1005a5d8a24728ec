"""Is a worker stopped (frozen by SIGSTOP, SIGTSTP, SIGTTIN or SIGTTOU)?

A stopped child has not exited, so waiting for its exit never returns; yet to its peers it
is as good as dead (it cannot answer their heartbeats). The supervisor asks this module
about its local workers and ends the job when one stays stopped (see supervisor.py).
"""

import os


def stop_signal(pid):
    """The signal that stopped child ``pid``, or None when it runs (or has exited, or is not
    our child). Never blocks and never reaps: the child's exit stays for ``Popen.wait``."""
    try:
        info = os.waitid(os.P_PID, pid, os.WSTOPPED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return None
    if info is None or info.si_code != os.CLD_STOPPED:
        return None
    return info.si_status
