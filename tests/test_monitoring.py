"""Monitoring: the core's counters (tfring.stats()) in a real 2-rank job, the interval
metrics computed from them, and the TensorBoard output of the Keras callback and the
tf.summary helper (rank 0 writes every tag with plausible values, rank 1 writes nothing)."""

import importlib.util
import json
import os

import pytest

from tests.helpers import rank_output, run_job
from tfring._basics import monitoring

WORKERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers")

STATS_KEYS = {
    "collectives", "tensors", "fused_tensors", "fusion_ratio", "bytes_reduced", "bytes_sent",
    "bytes_received", "stall_warnings", "cached_tensors", "fusion_copied_bytes", "control_bytes_sent",
    "control_messages_sent",
    "negotiation_seconds", "wait_for_slowest_seconds",
    "queue_seconds", "transfer_seconds", "allreduce_transfer_seconds", "execute_seconds", "size",
    "links", "slow_link_host", "slow_link_ranks", "slow_link_ratio", "slow_link_warnings",
}

STATS_SCRIPT = """
import json, time
import numpy as np
import tfring
tfring.init()
if tfring.rank() == 1:
    time.sleep(0.5)                   # rank 0 waits ~0.5 s for the slowest rank
tfring.allreduce(np.ones(3000, np.float32), name="late")
tfring.barrier()
before = tfring.stats()
handles = [tfring.allreduce_async(np.ones(250, np.float32), name=f"small{i}") for i in range(8)]
for h in handles:
    h.wait(timeout=30)
tfring.allreduce(np.ones(1 << 18, np.float32), name="big")   # 1 MiB
print("STATS", json.dumps({"before": before, "after": tfring.stats()}), flush=True)
"""


def _stats_of(stdout, rank):
    line = next(l for l in rank_output(stdout, rank).splitlines() if l.startswith("STATS "))
    return json.loads(line[len("STATS "):])


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_core_counters_in_a_two_rank_job():
    result = run_job(2, STATS_SCRIPT, timeout=45)
    late = {r: _stats_of(result.stdout, r)["before"] for r in range(2)}
    for r in range(2):
        s = _stats_of(result.stdout, r)["after"]
        assert set(s) == STATS_KEYS
        assert s["size"] == 2
        assert s["bytes_reduced"] == 3000 * 4 + 8 * 1000 + (1 << 20)
        # np=2: each rank sends and receives one half in each of the two ring phases
        assert s["bytes_sent"] == s["bytes_received"] == s["bytes_reduced"]
        assert s["allreduce_transfer_seconds"] <= s["transfer_seconds"] <= s["execute_seconds"]
        assert s["transfer_seconds"] > 0
        assert s["stall_warnings"] == 0
        assert s["fusion_ratio"] == s["tensors"] / s["collectives"]
        # Only the small tensors that travelled fused were packed (copied); the 1 MiB one
        # ran on its own, where it is.
        b = _stats_of(result.stdout, r)["before"]
        assert s["fusion_copied_bytes"] - b["fusion_copied_bytes"] == 1000 * (s["fused_tensors"] - b["fused_tensors"])
    # The late rank waits for nobody; rank 0 waited about the 0.5 s sleep for it.
    assert 0.4 < late[0]["wait_for_slowest_seconds"] < 3.0, late
    assert late[1]["wait_for_slowest_seconds"] < 0.3, late
    assert late[0]["negotiation_seconds"] >= late[0]["wait_for_slowest_seconds"] - 0.05, late


def test_interval_metrics_definitions():
    before = {"bytes_reduced": 1000, "collectives": 2, "tensors": 2, "allreduce_transfer_seconds": 1.0,
              "negotiation_seconds": 0.5, "size": 4}
    after = {"bytes_reduced": 1000 + 8_000_000, "collectives": 4, "tensors": 12, "allreduce_transfer_seconds": 1.01,
             "negotiation_seconds": 0.75, "wait_for_slowest_seconds": 0.1, "stall_warnings": 1, "size": 4}
    m = monitoring.interval_metrics(before, after)
    assert m["bytes_reduced"] == 8_000_000
    assert m["fusion_ratio"] == 5.0  # 10 tensors in 2 collectives
    assert m["bus_bandwidth_gbps"] == pytest.approx(8e6 * 2 * 3 / 4 / 0.01 / 1e9)  # 1.2 GB/s
    assert m["negotiation_seconds"] == pytest.approx(0.25)
    assert (m["wait_for_slowest_seconds"], m["stall_warnings"]) == (0.1, 1.0)
    idle = monitoring.interval_metrics(after, after)
    assert (idle["fusion_ratio"], idle["bus_bandwidth_gbps"]) == (0.0, 0.0)
    one = monitoring.interval_metrics({}, dict(after, size=1))
    assert one["bus_bandwidth_gbps"] == 0.0  # nothing crosses a wire with one rank
    assert (m["slow_link_rank"], m["slow_link_ratio"], m["slow_link_warnings"]) == (-1.0, 0.0, 0.0)
    slow = monitoring.interval_metrics(before, dict(after, slow_link_ranks=[4, 5], slow_link_ratio=9.5,
                                                    slow_link_warnings=1))
    assert (slow["slow_link_rank"], slow["slow_link_ratio"], slow["slow_link_warnings"]) == (4.0, 9.5, 1.0)


def _scalars(run_dir):
    """{tag: [(step, value), ...]} of every event file in ``run_dir``."""
    from tensorboard.backend.event_processing import event_accumulator

    acc = event_accumulator.EventAccumulator(run_dir, size_guidance={event_accumulator.TENSORS: 0})
    acc.Reload()
    out = {}
    for tag in acc.Tags()["tensors"]:
        out[tag] = [(e.step, float(e.tensor_proto.float_val[0] if e.tensor_proto.float_val
                                   else _decode(e.tensor_proto))) for e in acc.Tensors(tag)]
    return out


def _decode(proto):
    import numpy as np

    return float(np.frombuffer(proto.tensor_content, np.float32)[0])


@pytest.mark.multiprocess
@pytest.mark.timeout(90)
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None or importlib.util.find_spec("tensorboard") is None,
                    reason="needs TensorFlow and TensorBoard")
def test_keras_callback_and_summary_helper_write_on_rank_0_only(tmp_path):
    with open(os.path.join(WORKERS, "tfring_metrics.py")) as f:
        script = f.read()
    result = run_job(2, script, script_args=(str(tmp_path),), timeout=75)
    for r in range(2):
        assert f"rank {r}: tfring metrics OK" in result.stdout, result.stdout + result.stderr
    assert not (tmp_path / "rank1").exists(), "rank 1 must write nothing"
    logs = tmp_path / "rank0"
    assert {p.name for p in logs.iterdir()} >= {"train", "tfring", "custom"}

    fit = _scalars(str(logs / "tfring"))
    epoch_tags = {"tfring/epoch_" + n for n in (
        "bytes_reduced", "bytes_sent", "bus_bandwidth_gbps", "wait_for_slowest_seconds",
        "negotiation_seconds", "transfer_seconds", "fusion_ratio", "stall_warnings", "collectives",
        "slow_link_warnings", "slow_link_rank", "slow_link_ratio")}
    assert epoch_tags <= set(fit), sorted(fit)
    assert {t.replace("epoch_", "batch_") for t in epoch_tags} <= set(fit), sorted(fit)
    # 2 epochs of 8 steps, update_freq=4: epochs 0 and 1, batches at steps 4, 8, 12, 16.
    assert [s for s, _ in fit["tfring/epoch_bytes_reduced"]] == [0, 1]
    assert [s for s, _ in fit["tfring/batch_bytes_reduced"]] == [4, 8, 12, 16]
    model_bytes = 4 * (6 * 16 + 16 + 16 * 3 + 3)  # float32 gradients of the model
    for _, v in fit["tfring/epoch_bytes_reduced"]:
        assert v >= 8 * model_bytes  # every step reduces the gradients (plus metrics)
    for _, v in fit["tfring/batch_bytes_reduced"]:
        assert v >= 4 * model_bytes
    for tag in ("bus_bandwidth_gbps", "transfer_seconds", "negotiation_seconds", "fusion_ratio", "collectives"):
        assert all(v > 0 for _, v in fit["tfring/epoch_" + tag]), (tag, fit["tfring/epoch_" + tag])
    assert all(0 < v < 100 for _, v in fit["tfring/epoch_bus_bandwidth_gbps"])  # GB/s over loopback/shm
    assert all(v >= 0 for _, v in fit["tfring/epoch_wait_for_slowest_seconds"])
    assert all(v == 0 for _, v in fit["tfring/epoch_stall_warnings"])
    assert all(v == -1 for _, v in fit["tfring/epoch_slow_link_rank"])  # one host: no link between hosts
    # np=2: bytes on the wire equal the bytes reduced (two half-buffer phases)
    assert all(s == b for (_, s), (_, b) in zip(fit["tfring/epoch_bytes_sent"], fit["tfring/epoch_bytes_reduced"]))

    custom = _scalars(str(logs / "custom"))
    assert [s for s, _ in custom["tfring/bytes_reduced"]] == [0, 1, 2]
    assert all(v > 0 for _, v in custom["tfring/bytes_reduced"])
    assert all(v > 0 for _, v in custom["tfring/bus_bandwidth_gbps"])


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_log_level_per_subsystem_and_per_rank_files(tmp_path):
    script = "import numpy as np, tfring\ntfring.init()\ntfring.allreduce(np.ones(4))\n"
    logs = tmp_path / "logs"
    run_job(2, script, timeout=45, args=("--log-level", "error,transport=debug", "--output-filename", str(logs)))
    for r in range(2):
        text = (logs / f"rank.{r}.log").read_text()
        assert f":rank {r}:pid " in text and "] transport: data listener on" in text, text
        assert "[tfring DEBUG " in text, text
        assert "runtime: initialized" not in text, text  # runtime stays at error
    bad = run_job(1, "print(1)", timeout=30, args=("--log-level", "warning,bogus=debug"), check=False)
    assert bad.returncode != 0 and "unknown log subsystem 'bogus'" in bad.stderr
