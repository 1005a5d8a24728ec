"""What the job's store serves as the job grows: the probe (probe.py) over TCP at each size,
reading the kernel's byte counters of every rank's connection to the launcher's store right
after init, around a busy phase (cached 8-byte allreduces) and around a quiet idle phase:
the steady state while the job works and while it waits. Results go to
``lab/results/scale_store_traffic_<name>.json``; the record is lab/records/scaling.md.

    python -m lab.scale.store_traffic --sizes 8 16 32 64 --name after [--idle-s 6 --busy-s 6]
    python -m lab.scale.store_traffic --sizes 64 --name before --tfring /path/to/other/checkout

``--tfring`` runs the ranks (and the launcher) on another checkout's built ``tfring`` package,
this checkout's probe: the same measurement of an earlier build, for before/after.
"""

import argparse
import json
import os

from lab.scale import jobs, run


def measure(np_, idle_s, busy_s, tfring_root=None, phases=False, shm=False):
    """The probe's row at ``np_`` ranks (jobs.summarize, with jobs.store_traffic's fields), or
    None when the job failed (logged). ``phases``: every rank logs init's phases
    (init_trace.h), and the row's ``init_timeline`` has them. ``shm``: shared memory on."""
    args = ["--latency-iters", 50, "--steps", 10, "--warmup", 5, "--idle-s", idle_s, "--busy-s", busy_s]
    env = {"PYTHONPATH": tfring_root + os.pathsep + jobs.ROOT} if tfring_root else {}
    if phases:
        env["TFRING_LOG_LEVEL"] = "warning,runtime=debug"
    return run.summarized(jobs.launch(np_, args, shm=shm, timeout_s=run.timeout_for(np_), env=env), f"np={np_}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 16, 32, 64])
    parser.add_argument("--idle-s", type=float, default=6.0,
                        help="the idle phase")
    parser.add_argument("--busy-s", type=float, default=6.0,
                        help="the busy phase: longer than the link watch's 5 s period")
    parser.add_argument("--name", default="store_traffic")
    parser.add_argument("--tfring", default=None, help="another checkout whose built tfring the ranks run")
    parser.add_argument("--phases", action="store_true", help="log init's phases on every rank (init_timeline)")
    parser.add_argument("--shm", action="store_true", help="shared memory between the ranks (default: TCP only)")
    args = parser.parse_args()
    rows = []
    for np_ in args.sizes:
        row = measure(np_, args.idle_s, args.busy_s, args.tfring, args.phases, args.shm)
        if row is None:
            continue
        rows.append(row)
        run.log(f"np={np_:3}: store read {row['store_bytes_read_init']:,} B at init "
                f"({row['store_bytes_read_init_per_rank']:,.0f} per rank, busiest {row['store_bytes_read_init_max']:,}, "
                f"rank 0 {row['store_bytes_read_init_rank0']:,}), written {row['store_bytes_written_init']:,}; "
                f"idle: read {row.get('store_bytes_read_idle_per_s', float('nan')):,.0f} B/s "
                f"(rank 0 {row.get('store_bytes_read_idle_rank0_per_s', float('nan')):,.0f}), written "
                f"{row.get('store_bytes_written_idle_per_s', float('nan')):,.0f} B/s; busy: read "
                f"{row.get('store_bytes_read_busy_per_s', float('nan')):,.0f} B/s (rank 0 "
                f"{row.get('store_bytes_read_busy_rank0_per_s', float('nan')):,.0f}), written "
                f"{row.get('store_bytes_written_busy_per_s', float('nan')):,.0f} B/s; init {row['init_call_s']:.2f} s "
                f"({row['init_after_last_call_s']:.2f} s after the last rank's call)")
        run.log(f"  rings mapped: busiest rank {row['ring_maps_max']}, all ranks {row['ring_maps_total']}; "
                f"per rank (median): RSS {row['other_rss_mb_median']:.1f} MB, of it shared "
                f"{row['rss_shmem_mb_median']:.2f} MB, address space {row['vm_size_mb_median']:.0f} MB")
        for event, (lo, mid, hi) in row["init_timeline"].items():
            run.log(f"  {event:16} after launch: first {lo:7.2f} s, median {mid:7.2f} s, last {hi:7.2f} s")
    path = os.path.join(run.RESULTS, f"scale_store_traffic_{args.name}.json")
    with open(path, "w") as f:
        json.dump({"machine": run.machine(), "tfring": args.tfring or jobs.ROOT, "idle_s": args.idle_s,
                   "busy_s": args.busy_s, "rows": rows}, f, indent=1)
    run.log(f"wrote {path}")


if __name__ == "__main__":
    main()
