"""What the host-level fault tests (test_host_faults*.py, issue 32) share: the lab's shape
(3 emulated hosts x 2 light ranks), the loop every rank runs until a fault stops it, and
the ``lab`` fixture that builds the hosts and always tears them down."""

import subprocess

import pytest

from tools.hostlab import host_faults, netns

HOSTS, RANKS_PER_HOST = 3, 2

# Every rank loops small allreduces until one fails ("ERR <time> <class> <message>");
# rank 0 drops a marker (argv[1]) once they run, the moment the fault comes.
LOOP = """
import sys, time, numpy as np, tfring
tfring.init()
x = np.ones(1 << 14, np.float32)
try:
    for i in range(10 ** 7):
        tfring.allreduce(x, name="loop")
        if i == 20 and tfring.rank() == 0:
            open(sys.argv[1], "w").close()
except Exception as e:
    print("ERR", time.time(), type(e).__name__, str(e).replace("\\n", " "), flush=True)
    raise SystemExit(1)
"""


@pytest.fixture
def lab():
    """(NetnsHosts, HostFaults) of HOSTS emulated hosts; afterwards every process left in
    them is killed and the namespaces removed, whatever happened. Skips where network
    namespaces cannot be built (the CI skip policy then fails the run)."""
    why = netns.unavailable()
    if why:
        pytest.skip(why)
    hosts = netns.NetnsHosts(HOSTS)
    try:
        hosts.create()
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        hosts.destroy()
        pytest.skip(f"cannot build the namespace network: {e}")
    faults = host_faults.HostFaults(hosts)
    try:
        yield hosts, faults
    finally:
        faults.stop_all()
        hosts.destroy()
