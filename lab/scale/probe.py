"""The scale lab's rank probe: one light rank (NumPy API, no TensorFlow) that measures what
grows with the job, and writes ``<out>/rank<R>.json``. Started by ``tfringrun`` (see
jobs.py); every phase is bounded (collectives wait with a timeout).

Phases, in order (every rank runs them together):
  init       wall time at process start (/proc/self/stat), at the ``tfring.init()`` call
             and when it returned;
  resources  open descriptors (``/proc/self/fd``, by kind) and memory (VmRSS, RssAnon,
             RssShmem) right after init;
  store      this rank's connection to the job's store (TFRING_STORE_ADDR): the kernel's
             byte counters (``ss -tinpH``, this process only) right after init, and again at
             the start and end of the idle phase (steady state: what the store serves
             while nothing is submitted);
  latency    an 8-byte allreduce (two float32, one name: cached), median of ``--latency-iters``;
  step       ``--tensors`` small named float32 tensors submitted together, then waited
             (after ``--warmup`` steps: the response cache knows them): median step time,
             and per step from ``tfring.stats()`` deltas: control messages / bytes sent,
             the process's CPU time (getrusage: every thread, background and liveness
             included) and the main thread's (``time.thread_time``);
  busy       with ``--busy-s S``: every rank loops on cached 8-byte allreduces for S s (rank 0
             decides when to stop: the loop's count is broadcast first), the store counters
             read before and after (what the store serves per second while the job runs:
             the link watch publishes every 5 s);
  idle       every rank idle for ``--idle-s`` s (nothing submitted): rank 0 reads its TCP
             sockets' byte counters (``ss -tinpH``, this process only) before and after:
             what moves then is heartbeat traffic (control messages sent meanwhile are
             recorded to show nothing else moved);
  big        allreduce of each ``--big-bytes`` size (float32), median of ``--big-iters``;
  kill       with ``--kill-rank K``: every rank loops on 8-byte allreduces, rank K writes
             the wall time and SIGKILLs itself (``--kill-signal STOP``: freezes itself)
             after ``--kill-after`` iterations; each survivor records when its collective
             failed and the error's first line;
  shutdown   ``tfring.shutdown()``'s duration (skipped after a kill).
"""

import os
import time

T_IMPORT = time.time()  # before numpy / tfring: the probe's first line

import argparse
import json
import resource
import signal
import statistics
import subprocess

import numpy as np

COLLECTIVE_TIMEOUT_S = 120


def process_start_wall():
    """Wall-clock time at which this process started (the kernel's start time, 10 ms ticks)."""
    with open("/proc/self/stat") as f:
        start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    age = time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
    return time.time() - age


def descriptors():
    """Open descriptors of this process by kind (socket, anon_inode, pipe, file, other)."""
    kinds = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # the listing's own descriptor, closed meanwhile
        kind = target.split(":")[0] if ":" in target and not target.startswith("/") else "file"
        kinds[kind] = kinds.get(kind, 0) + 1
    return {"total": sum(kinds.values()), "by_kind": kinds}


def memory_kb():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key = line.split(":")[0]
            if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem", "VmHWM", "VmSize"):
                out[key] = int(line.split()[1])
    with open("/proc/self/maps") as f:  # shared-memory rings mapped (their names are unlinked)
        out["ring_maps"] = sum(1 for line in f if "/tfring-" in line)
    return out


def cpu_seconds():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def socket_bytes(ss_filter=""):
    """{local->peer: (bytes_sent, bytes_received)} for this process's TCP sockets (``ss``; an
    ``ss`` filter expression such as ``dport = :1234`` keeps only those)."""
    out = subprocess.run(["ss", "-tinpH", *ss_filter.split()], capture_output=True, text=True, timeout=30,
                         check=False).stdout
    result, key = {}, None
    mine = f"pid={os.getpid()},"
    for line in out.splitlines():
        if not line.startswith((" ", "\t")):
            words = line.split()
            key = f"{words[3]}->{words[4]}" if mine in line and len(words) >= 5 else None
            continue
        if key is None:
            continue
        fields = dict(w.split(":", 1) for w in line.split() if ":" in w)
        result[key] = (int(fields.get("bytes_sent", 0)), int(fields.get("bytes_received", 0)))
        key = None
    return result


def store_bytes():
    """(bytes_sent, bytes_received) of this process's connections to the job's store, or None
    where the job has no store address (one rank)."""
    addr = os.environ.get("TFRING_STORE_ADDR", "")
    if ":" not in addr:
        return None
    port = addr.rsplit(":", 1)[1]
    sockets = socket_bytes(f"dport = :{port}")
    return [sum(v[0] for v in sockets.values()), sum(v[1] for v in sockets.values())]


def barrier(tfring, name):
    tfring.allreduce(np.zeros(1, np.float32), name=f"scale.barrier.{name}")


def run_busy(tfring, seconds, result):
    """Cached 8-byte allreduces for ``seconds``: as many on every rank (rank 0 times the first
    100 and sets the count), with the store's byte counters read before and after."""
    x = np.ones(2, np.float32)
    t = time.monotonic()
    for _ in range(100):
        tfring.allreduce_async(x, name="scale.busy").wait(timeout=COLLECTIVE_TIMEOUT_S)
    per_call = (time.monotonic() - t) / 100
    count = np.array([int(seconds / max(per_call, 1e-6))], np.float64)
    count = int(tfring.allreduce(count if tfring.rank() == 0 else np.zeros(1, np.float64), op=tfring.Sum,
                                 name="scale.busy.count")[0])
    barrier(tfring, "busy")
    before, t0 = store_bytes(), time.monotonic()
    for _ in range(count):
        tfring.allreduce_async(x, name="scale.busy").wait(timeout=COLLECTIVE_TIMEOUT_S)
    elapsed, after = time.monotonic() - t0, store_bytes()
    result["busy"] = {"seconds": elapsed, "allreduces": count, "store_bytes_before": before,
                      "store_bytes_after": after}


def run_kill(tfring, args, result):
    rank = tfring.rank()
    x = np.ones(2, np.float32)
    for i in range(1_000_000):
        if rank == args.kill_rank and i == args.kill_after:
            with open(os.path.join(args.out, "killed.json"), "w") as f:
                json.dump({"rank": rank, "t_kill": time.time(), "signal": args.kill_signal}, f)
            os.kill(os.getpid(), getattr(signal, f"SIG{args.kill_signal}"))
        try:
            tfring.allreduce_async(x, name="scale.kill.loop").wait(timeout=COLLECTIVE_TIMEOUT_S)
        except Exception as e:  # noqa: BLE001 - what the survivor saw is the measurement
            result["kill"] = {"t_error": time.time(), "iteration": i, "error_type": type(e).__name__,
                              "message": str(e).splitlines()[0][:400]}
            return


def main():
    parser = argparse.ArgumentParser(description="scale lab rank probe (started by tfringrun)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--latency-iters", type=int, default=200)
    parser.add_argument("--tensors", type=int, default=150)
    parser.add_argument("--elements", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--idle-s", type=float, default=3.0)
    parser.add_argument("--busy-s", type=float, default=0.0)
    parser.add_argument("--big-bytes", type=int, nargs="*", default=[])
    parser.add_argument("--big-iters", type=int, default=5)
    parser.add_argument("--kill-rank", type=int, default=-1)
    parser.add_argument("--kill-after", type=int, default=100)
    parser.add_argument("--kill-signal", choices=["KILL", "STOP"], default="KILL",
                        help="STOP: the rank freezes (found by heartbeats, TFRING_PEER_TIMEOUT_S)")
    args = parser.parse_args()

    t_start = process_start_wall()
    import tfring

    t_call, cpu_call = time.time(), cpu_seconds()
    tfring.init()
    t_done, cpu_done = time.time(), cpu_seconds()
    rank, size = tfring.rank(), tfring.size()
    result = {"rank": rank, "size": size, "local_size": tfring.local_size(), "pid": os.getpid(),
              "t_process_start": t_start, "t_import": T_IMPORT, "t_init_call": t_call, "t_init_done": t_done,
              "cpu_s_at_init_call": cpu_call, "cpu_s_in_init": cpu_done - cpu_call,
              "fds": descriptors(), "memory_kb": memory_kb(), "loadavg": os.getloadavg(),
              "store_bytes_after_init": store_bytes()}
    path = os.path.join(args.out, f"rank{rank}.json")

    def write():
        with open(path + ".tmp", "w") as f:
            json.dump(result, f)
        os.replace(path + ".tmp", path)

    write()  # init's figures survive whatever comes next
    if args.kill_rank >= 0:
        run_kill(tfring, args, result)
        write()
        return

    # latency: one cached 8-byte allreduce, timed one by one
    x = np.ones(2, np.float32)
    for _ in range(20):
        tfring.allreduce_async(x, name="scale.latency").wait(timeout=COLLECTIVE_TIMEOUT_S)
    times = []
    cpu_before = cpu_seconds()
    for _ in range(args.latency_iters):
        t = time.perf_counter()
        tfring.allreduce_async(x, name="scale.latency").wait(timeout=COLLECTIVE_TIMEOUT_S)
        times.append(time.perf_counter() - t)
    result["latency_8b_s"] = {"median": statistics.median(times), "min": min(times), "max": max(times),
                              "cpu_s_per_call": (cpu_seconds() - cpu_before) / args.latency_iters}

    # step: K small named tensors submitted together, then waited
    grads = [np.full(args.elements, i, np.float32) for i in range(args.tensors)]
    names = [f"scale/layer_{i}/grad" for i in range(args.tensors)]

    def step():
        handles = [tfring.allreduce_async(g, op=tfring.Sum, name=n) for g, n in zip(grads, names)]
        return [h.wait(timeout=COLLECTIVE_TIMEOUT_S) for h in handles]

    for _ in range(args.warmup):
        out = step()
    assert all(float(o[0]) == i * size for i, o in enumerate(out)), "wrong allreduce result"
    barrier(tfring, "step")
    before, cpu0, thread0 = tfring.stats(), cpu_seconds(), time.thread_time()
    times = []
    for _ in range(args.steps):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    cpu1, thread1, after = cpu_seconds(), time.thread_time(), tfring.stats()
    keys = ("control_messages_sent", "control_bytes_sent", "cached_tensors", "collectives", "tensors",
            "bytes_sent", "bytes_received")
    result["step"] = {"tensors": args.tensors, "elements": args.elements, "steps": args.steps,
                      "median_s": statistics.median(times), "min_s": min(times), "max_s": max(times),
                      "cpu_s_per_step": (cpu1 - cpu0) / args.steps,
                      "main_thread_cpu_s_per_step": (thread1 - thread0) / args.steps,
                      "per_step": {k: (after[k] - before[k]) / args.steps for k in keys}}

    if args.busy_s > 0:
        run_busy(tfring, args.busy_s, result)

    # idle: heartbeats only
    barrier(tfring, "idle")
    result["store_bytes_idle_start"] = store_bytes()
    stats0 = tfring.stats()
    sockets0 = socket_bytes() if rank == 0 else None
    t0 = time.monotonic()
    # The workers stay idle 1 s longer, so rank 0's second reading never sees their next
    # request; they read their own counters 0.5 s before rank 0 ends, so that a relay's
    # reading never sees a request it passes on for a rank below it (control tree) either.
    time.sleep(args.idle_s if rank == 0 else max(0.0, args.idle_s - 0.5))
    if rank == 0:
        sockets1, elapsed = socket_bytes(), time.monotonic() - t0
        common = set(sockets0) & set(sockets1)
        sent = sum(sockets1[k][0] - sockets0[k][0] for k in common)
        received = sum(sockets1[k][1] - sockets0[k][1] for k in common)
        result["idle"] = {"seconds": elapsed, "tcp_sockets": len(sockets1), "bytes_sent_per_s": sent / elapsed,
                          "bytes_received_per_s": received / elapsed,
                          "sockets_that_moved": sum(1 for k in common if sockets1[k] != sockets0[k])}
    result.setdefault("idle", {})["control_messages_sent"] = (
        tfring.stats()["control_messages_sent"] - stats0["control_messages_sent"])
    if rank != 0:
        time.sleep(1.5)
    result["store_bytes_idle_end"] = store_bytes()
    result["idle"]["store_seconds"] = time.monotonic() - t0
    barrier(tfring, "idle.end")
    # Descriptors again once the latency loop and the steps have run: with lazy data
    # connections (TFRING_DATA_CONNECTIONS) a rank holds sockets only to the peers its
    # algorithms used.
    result["fds_after_work"] = descriptors()

    # big: bandwidth-bound allreduces
    result["big"] = {}
    for nbytes in args.big_bytes:
        buf = np.ones(nbytes // 4, np.float32)
        for _ in range(2):
            tfring.allreduce_async(buf, name=f"scale.big.{nbytes}").wait(timeout=COLLECTIVE_TIMEOUT_S)
        times = []
        for _ in range(args.big_iters):
            barrier(tfring, f"big.{nbytes}")
            t = time.perf_counter()
            tfring.allreduce_async(buf, name=f"scale.big.{nbytes}").wait(timeout=COLLECTIVE_TIMEOUT_S)
            times.append(time.perf_counter() - t)
        result["big"][str(nbytes)] = {"median_s": statistics.median(times), "times_s": times}

    barrier(tfring, "shutdown")
    t = time.time()
    tfring.shutdown()
    result["shutdown"] = {"t_start": t, "seconds": time.time() - t}
    result["memory_kb_end"] = memory_kb()
    write()


if __name__ == "__main__":
    main()
