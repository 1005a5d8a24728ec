"""The scale lab (lab/scale/, lab/records/scaling.md): the counts its cost model is built on
are checked against a real 4-rank job of the lab's probe, so the model cannot drift from
the code silently; and the model's fitting is checked on synthetic data."""

import math

import pytest

from lab.scale import jobs, model, report

# ---------------------------------------------------------------- the model against the code

N = 4
FANOUT = 2  # a control tree, not the star: rank 0's children are 1 and 2, rank 1's is 3


@pytest.fixture(scope="module")
def probe_row():
    job = jobs.launch(N, ["--latency-iters", 20, "--warmup", 3, "--steps", 8, "--idle-s", 2.2], shm=False,
                      timeout_s=60, env={"TFRING_CONTROL_FANOUT": str(FANOUT)})
    return job, jobs.summarize(job)


@pytest.mark.multiprocess
@pytest.mark.timeout(90)
def test_descriptors_are_the_models(probe_row):
    job, row = probe_row
    # data mesh, two control children, two heartbeat neighbours, the store
    assert row["rank0_sockets"] == model.rank0_sockets_today(N, fanout=FANOUT) == (N - 1) + 2 + 2 + 1
    assert row["rank0_fds"] == model.rank0_fds_today(N, fanout=FANOUT), job["ranks"][0]["fds"]
    for r, rank in enumerate(job["ranks"][1:], start=1):
        # data mesh, a parent, rank 1's child 3, heartbeats, the store
        assert rank["fds"]["by_kind"]["socket"] == model.worker_sockets_today(N, rank=r, fanout=FANOUT) == (
            (N - 1) + 1 + (1 if r == 1 else 0) + 2 + 1), r
        assert rank["fds"]["total"] == model.worker_fds_today(N, rank=r, fanout=FANOUT), rank["fds"]


@pytest.mark.multiprocess
@pytest.mark.timeout(90)
def test_control_messages_per_cached_step_are_the_models(probe_row):
    job, _ = probe_row
    step = job["ranks"][0]["step"]["per_step"]
    assert step["cached_tensors"] == 150  # the cache knew every tensor: a steady-state step
    # rank 0 answers each of its 2 control children once per cycle that runs a collective
    assert step["control_messages_sent"] == pytest.approx(
        model.rank0_control_messages_today(N, step["collectives"], fanout=FANOUT), abs=1e-9)
    assert step["control_messages_sent"] == 2 * step["collectives"]
    assert step["collectives"] >= 1


@pytest.mark.multiprocess
@pytest.mark.timeout(90)
def test_heartbeats_at_rank_0_are_the_models(probe_row):
    job, row = probe_row
    idle = job["ranks"][0]["idle"]
    assert row["idle_control_messages"] == 0  # nothing but heartbeats moved
    sent = round(idle["bytes_sent_per_s"] * idle["seconds"])
    assert sent % model.HEARTBEAT_FRAME_BYTES == 0, "only whole heartbeat frames moved"
    # one interval's bytes: a ping to each of its 2 ring neighbours and a pong to each of theirs
    per_interval = model.heartbeat_rank0_frames_per_s_today(N) * model.HEARTBEAT_FRAME_BYTES * model.heartbeat_interval_s()
    assert math.floor(idle["seconds"]) - 1 <= sent / per_interval <= math.ceil(idle["seconds"]) + 1, idle


@pytest.mark.multiprocess
@pytest.mark.timeout(90)
def test_a_killed_rank_is_named_by_every_survivor():
    row = jobs.summarize(jobs.launch(N, ["--kill-rank", N - 1, "--kill-after", 20], shm=False, timeout_s=60))
    kill = row["kill"]
    assert row["returncode"] == 137
    assert kill["survivors_named"] == kill["survivors"] == N - 1, kill
    assert kill["error_type"] == "PeerLostError" and f"rank {N - 1} is gone" in kill["message"]
    assert kill["detect_max_s"] < 5


# ---------------------------------------------------------------- exact counts


def test_store_requests_counted_by_hand():
    # The star design, n=2: rank 0: ADD, SET addr, SET hostname, SET host, GET host/1;
    # rank 1: ADD, SET addr, GET addr/0, GET hostname/0, SET host, GET host/0.
    assert model.store_requests_today(2, design="star") == 11
    assert model.store_requests_today(1) == 0
    n = 1000
    assert model.store_requests_today(n, design="star") == 1.5 * n * (n - 1) + 4 * n
    # The roster exchange before the layout: rank 1's ADD, SET roster/1, GET roster; rank 0's
    # ADD, GET roster/1, SET roster.
    assert model.store_requests_today(2, init="roster") == 6 and model.store_requests_today(1) == 0
    assert model.store_requests_today(n, init="roster") == 4 * n - 2
    # As built: rank 1's ADD, SET peer/1, SET roster/1, GET layout, GET peer/0 (it dials rank 0);
    # rank 0's ADD, SET peer/0, GET roster/1, SET layout.
    assert model.store_requests_today(2) == 9
    # lazy past 8 ranks: each rank reads the cards of its parent and lower ring neighbour
    # (one card where they are the same rank), rank n-1 rank 0's too: O(n) in all
    assert n - 1 < model.cards_at_init(n) <= 2 * (n - 1) + 1
    assert model.store_requests_today(n) == 5 * n - 2 + model.cards_at_init(n)
    assert model.cards_at_init(9) == 1 + 3 * 2 + 3 * 2 + 3  # rank 1: 0; 2-4: 0, r-1; 5-7: 1, r-1; 8: 1, 7, 0
    # shared-memory rings: 4 per rank with a local peer, and every local peer's card
    # (roster_test.cc counts 30 + 56 + 32 at 8 ranks on a host, without the 8 generation ADDs)
    assert model.store_requests_today(8, local_size=8, shm=True) == 30 + 56 + 32 + 8
    # past 8 ranks (lazy data connections) only the control rings at init: a rank makes rings
    # with at most its parent and its 4 children, whatever its host's size
    assert max(len(model.shm_ring_peers_at_init(r, 256, 256)) for r in range(256)) == 5
    assert model.shm_ring_peers_at_init(0, 256, 256) == {1, 2, 3, 4}
    assert model.shm_ring_peers_at_init(1, 256, 8) == {0, 5, 6, 7}  # child 8 is on the next host
    assert model.shm_ring_peers_at_init(9, 256, 8) == set()  # parent 2 and children 37-40 elsewhere


def test_link_bound_fractions_match_issue_31():
    assert model.link_bound_fraction(2, 4) == pytest.approx(2 / 3)
    assert model.link_bound_fraction(2, 8) == pytest.approx(4 / 7)  # 57%
    assert model.link_bound_fraction(4, 8) == pytest.approx(6 / 7)  # 86%
    assert model.link_limit_s(2, 16 << 20, 125e6) == pytest.approx((16 << 20) / 125e6)


def test_control_tree_depth_is_the_codes():
    # ControlTree::depth (cc/core/transport/control_tree.h): ceil(log_F(n(F-1)+1)) - 1 hops; the star's is 1
    for fanout in (2, 4, 8):
        for n in range(fanout + 2, 5000, 37):
            assert model.control_tree_depth(n, fanout) == math.ceil(
                round(math.log(n * (fanout - 1) + 1, fanout), 9)) - 1, (n, fanout)
    assert [model.control_tree_depth(n) for n in (1, 2, 5, 6, 21, 22, 1024)] == [0, 1, 1, 2, 2, 3, 5]
    assert model.control_tree_depth(1000, fanout=0) == 1


def test_lazy_connections_counted():
    # auto: a full mesh up to 8 ranks, lazy beyond (a listener + the peers the collectives used)
    assert [model.lazy_data(n) for n in (8, 9)] == [False, True]
    assert not model.lazy_data(64, design="star") and model.lazy_data(4, lazy=True)
    assert [model.recursive_doubling_partners(n) for n in (1, 2, 8, 6, 1000, 1024)] == [0, 1, 3, 3, 10, 10]
    # rank 0 at 64 ranks: listener, 4 control children, 2 heartbeat neighbours, the store (13 fds after init)
    assert model.rank0_fds_today(64) == 1 + 4 + 2 + 1 + model.OTHER_FDS == 13
    assert model.rank0_fds_today(64, data_peers=6) == 19
    assert model.rank0_fds_today(8) == 7 + 4 + 2 + 1 + model.OTHER_FDS  # the full mesh


def test_model_counts_match_the_committed_tree_runs():
    """The lab's runs of the control tree + lazy connections (lab/results) against the exact counts."""
    for payload in report.load_tree_runs():
        for res in payload["results"]:
            n = res["np"]
            for row in res["runs"]:
                assert row["rank0_fds"] == model.rank0_fds_today(n), (n, row["rank0_fds"])
                assert row["rank0_control_messages_per_step"] == pytest.approx(
                    model.rank0_control_messages_today(n, row["collectives_per_step"]))
                if row.get("rank0_fds_after_work") is not None and model.lazy_data(n):
                    # the probe's collectives are small allreduces: recursive doubling's partners only
                    peers = model.recursive_doubling_partners(n)
                    assert row["rank0_fds_after_work"] == model.rank0_fds_today(n, data_peers=peers), n
                    assert row["other_fds_after_work_max"] == model.worker_fds_today(n, rank=1, data_peers=peers), n


def test_algorithm_steps():
    assert [model.ring_steps(n) for n in (1, 2, 8)] == [0, 2, 14]
    assert [model.recursive_doubling_steps(n) for n in (1, 2, 8, 6, 1024)] == [0, 1, 3, 4, 10]
    # 8-byte allreduce data steps at 1,024 ranks, 30 us hops (lab/records/scaling.md's prediction)
    assert model.small_allreduce_s("ring", 1024, 30e-6) == pytest.approx(2046 * 30e-6)
    assert model.small_allreduce_s("recursive_doubling", 1024, 30e-6) == pytest.approx(10 * 30e-6)
    assert model.small_allreduce_s("recursive_doubling", 1024, 30e-6, 8, 17e-6) == pytest.approx(3 * 17e-6 + 7 * 30e-6)
    assert model.small_allreduce_s("hierarchical_doubling", 1024, 30e-6, 8, 17e-6) == pytest.approx(
        6 * 17e-6 + 7 * 30e-6)
    assert model.heartbeat_interval_s(30) == 1.0 and model.heartbeat_interval_s(0.2) == 0.05


# ---------------------------------------------------------------- fitting


def test_fit_recovers_coefficients_and_drops_negative_ones():
    xs = [2, 4, 8, 16, 32]
    assert model.fit(xs, [3 + 2 * (x - 1) for x in xs], [model.ONE, model.PEERS]) == pytest.approx([3, 2])
    # a constant term that would come out negative is noise: dropped, the slope refitted
    ys = [5 * (x - 1) - 0.5 for x in xs]
    coef = model.fit(xs, ys, [model.ONE, model.PEERS])
    assert coef[0] == 0 and coef[1] == pytest.approx(5, rel=0.02)


def _synthetic_local(cpu=(2e-3, 3e-4), hop=50e-6, cycles=1.25, init=(0.1, 2e-5, 0.01)):
    results = []
    for n in (2, 4, 8, 16, 32):
        row = {
            "rank0_fds": model.rank0_sockets_today(n, "star") + model.OTHER_FDS,
            "other_fds_max": model.worker_sockets_today(n, "star") + model.OTHER_FDS,
            "rank0_control_messages_per_step": model.rank0_control_messages_today(n, cycles, design="star"),
            "rank0_control_bytes_per_step": 2000 * (n - 1) * cycles,
            "other_control_messages_per_step_mean": 4.0, "other_control_bytes_per_step_mean": 100.0,
            "rank0_cpu_s_per_step": cpu[0] + cpu[1] * (n - 1),
            "latency_8b_s": 10e-6 + hop * model.ring_steps(n),
            "init_call_s": init[0] + init[1] * model.store_requests_today(n, design="star") + init[2] * (n - 1),
            "rank0_rss_mb": 36.0, "shutdown_s": 1e-3 * (n - 1),
        }
        results.append({"np": n, "shm": "off", "runs": [row, row], "kill": {"kill": {"detect_max_s": 0.02}}})
    return {"control_plane": "star", "results": results}  # recorded before the ring: three init terms


def _synthetic_tree_runs(rounds=(1.0, 0.25), cpu=(1e-3, 5e-4)):
    results = []
    for n in (4, 16, 32, 64):
        c = rounds[0] + rounds[1] * math.log2(n)
        row = {
            "collectives_per_step": c,
            "rank0_control_messages_per_step": model.control_children(n) * c,
            "rank0_control_bytes_per_step": 1500 * model.control_children(n) * c,
            "other_control_messages_per_step_max": 30.0, "other_control_messages_per_step_mean": 15.0,
            "rank0_cpu_s_per_step": cpu[0] + cpu[1] * math.log2(n),
            "init_call_s": 0.05 * (n - 1), "latency_8b_s": 2e-4 * (n - 1),
        }
        results.append({"np": n, "shm": "off", "runs": [row], "kill": {"kill": {"detect_max_s": 0.01 * n}}})
    return [{"control_plane": "tree", "results": results}]


def test_model_fitted_on_synthetic_lab_data():
    m = model.Model.fit(_synthetic_local(), {"cpu_s_per_request": 20e-6}, tree_runs=_synthetic_tree_runs())
    assert (m.base_fds_rank0, m.base_fds_worker) == (model.OTHER_FDS, model.OTHER_FDS)
    assert m.rank0_messages == pytest.approx((0, 1.25), abs=1e-9)
    assert m.rank0_cpu == pytest.approx((2e-3, 3e-4))
    assert m.message_cpu_s == pytest.approx(3e-4 / (1.25 + 4.0))
    assert m.latency_tcp == pytest.approx((10e-6, 50e-6))
    assert m.init_lab == pytest.approx((0.1, 2e-5, 0.01))
    assert m.store_request_cpu_s == pytest.approx(10e-6)
    assert m.crash_detect_s == pytest.approx(0.02)
    assert m.init_fixed_s == pytest.approx(0.1 + 2e-5 * 11 + 0.01)  # init() at 2 ranks
    assert m.tree.rounds == pytest.approx((1.0, 0.25))
    assert m.tree.bytes_per_message == pytest.approx(1500)
    assert m.tree.rank0_messages_at_4 == pytest.approx(3 * 1.5)  # the star up to 5 ranks: 3 children
    assert m.tree.rank0_cpu == pytest.approx((1e-3, 5e-4))
    old, now = m.old(1024), m.now(1024)
    # the old design: data mesh (n-1), control star (n-1), heartbeat star (n-1), the store
    assert old["rank0_fds"] == 3 * 1023 + 1 + model.OTHER_FDS > m.assumptions.ulimit_fds
    # as built: listener + 10 doubling partners + 2 ring neighbours, 4 children, 2 heartbeat neighbours, store
    assert now["rank0_fds"] == 1 + 10 + 2 + 4 + 2 + 1 + model.OTHER_FDS
    assert now["max_fds"] == now["worker_fds"] == now["rank0_fds"] + 1  # a relay: a parent and 4 children
    assert old["rank0_control_messages_per_step"] == pytest.approx(1023 * 1.25)
    assert now["rank0_control_messages_per_step"] == pytest.approx(4 * (1.0 + 0.25 * 10))  # 4 children x rounds
    assert old["store_requests"] == 1.5 * 1024 * 1023 + 4 * 1024
    assert now["store_requests"] == 5 * 1024 - 2 + model.cards_at_init(1024)
    # 8 bytes: up and down a depth-5 tree (a hop and a message received and sent per relay) + 10 doubling hops
    hop, cpu = m.assumptions.hop_s, m.message_cpu_s
    assert now["latency_8b_s"] == pytest.approx(2 * 5 * (hop + 2 * cpu) + 10 * hop)
    assert old["latency_8b_s"] > now["latency_8b_s"]
    # init as built: rank 0 gathers 1023 entries; every rank reads the layout (128 hosts) and 2-3 cards
    a = m.assumptions
    spread = (1023 * a.record_bytes + 1023 * (24 + 128 * a.layout_host_bytes)
              + model.cards_at_init(1024) * a.card_bytes) / a.link_bytes_per_s
    assert now["init_s"] == pytest.approx(m.init_fixed_s + 1023 * (2 * hop + 10e-6) + spread
                                          + 2 * a.handshake_round_trips * 2 * hop)
    # heartbeats: rank 0 of the star pings and answers every rank, in the ring its 2 neighbours
    assert old["heartbeat_rank0_frames_per_s"] == 4 * 1023 and now["heartbeat_rank0_frames_per_s"] == 8
    # the limits in the order a growing job meets them: the star's descriptors cross ulimit at 3n + 3 > 1024
    limits = {row[0]: (row[4], row[6]) for row in model.first_limit(m)}
    assert limits["the most descriptors a rank holds"] == (341, None)
    with pytest.raises(ValueError, match="tree"):
        model.Model.fit(_synthetic_local()).now(64)


def test_data_ring_cost_fitted_on_synthetic_points():
    points = [(n, s, 2e-4 + model.ring_bytes_per_rank(n, s) / 1.5e9) for n in (2, 4, 8) for s in (1 << 20, 16 << 20)]
    a, b = model.data_ring_cost(points)
    assert a == pytest.approx(2e-4) and 1 / b == pytest.approx(1.5e9)
    payload = {"results": [{"np": 4, "shm": "off", "runs": [{"big_s": {"1048576": 0.01}}]},
                           {"np": 4, "shm": "on", "runs": [{"big_s": {"1048576": 0.02}}]}]}
    assert model.big_points(payload, shm="on") == [(4, 1 << 20, 0.02)]
    assert model.data_ring_cost([]) is None


def test_report_renders_the_committed_results():
    text, fitted = report.generate(draw=False)
    assert text.startswith(report.BEGIN) and text.endswith(report.END)
    for heading in ("many ranks on one host", "the design as built", "emulated hosts", "PREDICTIONS",
                    "Issue targets at 1,024 ranks", "Which limit"):
        assert heading in text
    assert fitted.base_fds_rank0 == model.OTHER_FDS  # what every lab job measured
    assert fitted.tree is not None and fitted.now(1000)["max_fds"] < 1024
