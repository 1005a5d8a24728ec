"""CPU-seconds of a command and of every process it leaves behind (daemons included).

    python lab/cpu_of_tree.py COMMAND...

Makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so orphans the command leaves
(Ray's raylet/GCS/workers, Spark's JVM) are re-parented here and, once they exit, their CPU
counts in this process's RUSAGE_CHILDREN like the command's own. A process whose parent
ignores SIGCHLD (Ray's raylet does: its workers and agents) is reaped by the kernel and its CPU
counts nowhere: the descendants are sampled every 0.2 s, and such a process adds its last
sampled CPU (its own and its waited children's; up to 0.2 s of it is missed). After the command exits it
waits up to --linger-s (default 60) for those descendants to exit, then names the ones still
running (and does not wait for them). Prints wall, user+system CPU-s to stderr.
"""

import ctypes
import os
import resource
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


HZ = os.sysconf("SC_CLK_TCK")
SIGCHLD_BIT = 1 << (17 - 1)


def _sample(last):
    """Records in ``last`` (pid -> CPU-s) the CPU of every descendant whose parent ignores SIGCHLD."""
    procs = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        procs[int(pid)] = (int(fields[1]), sum(int(x) for x in fields[11:15]) / HZ)
    me = os.getpid()
    for pid, (ppid, cpu) in procs.items():
        p = ppid
        while p > 1 and p != me:
            p = procs.get(p, (0, 0))[0]
        if p != me or ppid == me:
            continue
        try:
            with open(f"/proc/{ppid}/status") as f:
                ignored = int(next(line for line in f if line.startswith("SigIgn:")).split()[1], 16)
        except (OSError, StopIteration):
            continue
        if ignored & SIGCHLD_BIT:
            last[(pid, ppid)] = cpu


def _descendants():
    me, kids = os.getpid(), []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == me and fields[0] != "Z":
            kids.append((int(pid), stat.split("(", 1)[1].rsplit(")", 1)[0]))
    return kids


def main(argv):
    linger = 60.0
    if argv[:1] == ["--linger-s"]:
        linger, argv = float(argv[1]), argv[2:]
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    start = time.time()
    proc = subprocess.Popen(argv)
    auto_reaped = {}
    while proc.poll() is None:
        _sample(auto_reaped)
        time.sleep(0.2)
    rc = proc.returncode
    ended = time.time()
    deadline = ended + linger
    left = _descendants()
    if left:
        print(f"cpu_of_tree: left running when the command exited: {left}", file=sys.stderr)
    while left and time.time() < deadline:
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass
        _sample(auto_reaped)
        time.sleep(0.2)
        left = _descendants()
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    waited, lost = usage.ru_utime + usage.ru_stime, sum(auto_reaped.values())
    print(f"cpu_of_tree: rc={rc} {time.time() - start:.1f} s wall, {waited + lost:.1f} CPU-s ({waited:.1f} waited for"
          f" + {lost:.1f} auto-reaped, sampled); the last exited {time.time() - ended:.1f} s after the command; still running: {left or 'none'}",
          file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
