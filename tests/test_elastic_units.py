"""Elastic jobs, the parts that need no worker processes (issue 18): the discovery script's
format and failures, the blacklist's cooldown, the store protocol a worker joins through
(against a real store), and the run wrapper outside an elastic job (fail fast, as before)."""

import os
import threading

import pytest

from tfring import _core, errors
from tfring.elastic import ObjectState, protocol, run_fn
from tfring.elastic import worker as elastic_worker
from tfring.elastic.exceptions import JobEndedError
from tfring.runner import discovery
from tfring.runner.hosts import Host, slots_of

SECRET = "ab" * 32


def test_discovery_output_lines_and_default_slots():
    text = "hostA\nhostB:4\n  # a comment\n\n10.0.0.7:2  # trailing comment\n"
    assert discovery.parse_discovery_output(text, 2, "d.sh") == [Host("hostA", 2), Host("hostB", 4),
                                                                 Host("10.0.0.7", 2)]
    with pytest.raises(ValueError, match="d.sh: host 'a' is listed twice"):
        discovery.parse_discovery_output("a\na:2\n", 1, "d.sh")
    with pytest.raises(ValueError, match="d.sh, line 2: slots must be a positive integer"):
        discovery.parse_discovery_output("a\nb:zero\n", 1, "d.sh")


def test_a_failing_discovery_script_keeps_the_last_hosts_and_is_reported_once(tmp_path):
    script = tmp_path / "discover.sh"
    script.write_text("#!/bin/sh\necho a:2\necho b\n")
    script.chmod(0o755)
    reports = []
    found = discovery.ScriptDiscovery(str(script), 3, reports.append)
    assert found.hosts() == [Host("a", 2), Host("b", 3)]
    script.write_text("#!/bin/sh\necho 'cannot reach the cloud API' >&2\nexit 4\n")
    assert found.hosts() == [Host("a", 2), Host("b", 3)]
    assert found.hosts() == [Host("a", 2), Host("b", 3)]
    assert len(reports) == 1 and "exited with code 4: cannot reach the cloud API" in reports[0]
    script.write_text("#!/bin/sh\necho c:x\n")
    assert found.hosts() == [Host("a", 2), Host("b", 3)]
    assert len(reports) == 2 and "line 1: slots must be a positive integer" in reports[1]


def test_blacklist_is_for_good_by_default_and_doubles_its_cooldown_up_to_max():
    forever = discovery.Blacklist()
    assert forever.record_failure("a", 100.0) == float("inf")
    assert forever.blocked("a", 1e12) and not forever.blocked("b", 100.0) and forever.permanent()
    cooling = discovery.Blacklist((1.0, 3.0))
    assert [cooling.record_failure("a", 0.0) for _ in range(4)] == [1.0, 2.0, 3.0, 3.0]
    assert cooling.blocked("a", 2.9) and not cooling.blocked("a", 3.0) and not cooling.permanent()


def test_assignment_round_trip_and_the_generation_job_id():
    slot = slots_of(["h1", "h2", "h1"])[2]
    a = protocol.Assignment(4, slot)
    assert protocol.Assignment.decode(a.encode()) == a
    assert a.settings("myjob") == {**slot.env(), "TFRING_JOB_ID": "myjob.elastic4"}
    assert slot.env()["TFRING_LOCAL_RANK"] == "1" and slot.env()["TFRING_CROSS_SIZE"] == "2"


@pytest.fixture
def elastic_store(monkeypatch):
    """A real store, this process made elastic worker w5 of it; a client to play the driver."""
    server = _core.StoreServer("127.0.0.1", 0, SECRET)
    monkeypatch.setenv("TFRING_STORE_ADDR", f"127.0.0.1:{server.port}")
    monkeypatch.setenv("TFRING_SECRET", SECRET)
    monkeypatch.setenv(protocol.WORKER_ENV, "w5")
    elastic_worker.reset_for_tests()
    yield _core.StoreClient("127.0.0.1", server.port, SECRET, 5.0)
    elastic_worker.reset_for_tests()
    server.stop()


def _publish(driver, generation, hosts_by_worker):
    slots = slots_of(list(hosts_by_worker.values()))
    for wid, slot in zip(hosts_by_worker, slots):
        driver.set(protocol.assignment_key(generation, wid), protocol.Assignment(generation, slot).encode())
    assert driver.add(protocol.CURRENT, 1) == generation


def test_a_worker_marks_itself_ready_and_joins_the_first_generation_that_includes_it(elastic_store):
    driver = elastic_store
    _publish(driver, 1, {"w0": "a", "w1": "b"})  # formed before w5 was ready: not in it
    got = {}
    joiner = threading.Thread(target=lambda: got.update(elastic_worker.join_settings(timeout_s=20)))
    joiner.start()
    while not driver.add(protocol.ready_key("w5"), 0):
        pass
    _publish(driver, 2, {"w0": "a", "w1": "b", "w5": "a"})
    joiner.join(20)
    assert got["TFRING_RANK"] == "2" and got["TFRING_SIZE"] == "3" and got["TFRING_LOCAL_RANK"] == "1"
    assert got["TFRING_JOB_ID"] == f"{os.environ.get('TFRING_JOB_ID', 'default')}.elastic2"
    assert elastic_worker.joined_generation() == 2 == elastic_worker.current_generation()
    # A member left out of a later generation is told so (the driver stops such workers).
    _publish(driver, 3, {"w0": "a"})
    with pytest.raises(JobEndedError, match="worker w5 is not part of generation 3"):
        elastic_worker.join_settings(timeout_s=5)


def test_a_waiting_worker_learns_why_the_driver_ended_the_job(elastic_store):
    elastic_store.set(protocol.END_REASON, b"only 1 worker(s) could run for 3 s (--elastic-timeout)")
    elastic_store.add(protocol.ENDED, 1)
    with pytest.raises(JobEndedError, match=r"ended the job: only 1 worker\(s\) could run") as info:
        elastic_worker.join_settings(timeout_s=5)
    assert isinstance(info.value, errors.AbortedError)


def test_no_generation_in_time_ends_the_wait_naming_the_setting(elastic_store):
    with pytest.raises(JobEndedError, match=r"waited 0.3 s for generation 1 .*TFRING_ELASTIC_TIMEOUT_S"):
        elastic_worker.join_settings(timeout_s=0.3)


def test_outside_an_elastic_job_run_raises_at_once_and_commit_checks_nothing(monkeypatch):
    monkeypatch.delenv(protocol.WORKER_ENV, raising=False)
    broadcasts = []

    def bcast(obj):
        broadcasts.append(obj)
        return obj

    state = ObjectState(bcast, lambda: 0, epoch=3)
    calls = []

    @run_fn
    def train(state):
        calls.append(state.epoch)
        raise errors.PeerLostError("tfring rank 0: rank 1 is gone")

    with pytest.raises(errors.PeerLostError, match="rank 1 is gone"):
        train(state)
    assert calls == [3] and broadcasts == [{"epoch": 3}]  # synced once, never retried
    state.epoch = 4
    state.commit()  # saves; no host-update broadcast outside an elastic job
    assert broadcasts == [{"epoch": 3}]
    state.epoch = 9
    state.restore()
    assert state.epoch == 4


class _NoSignals:
    def take(self):
        return []


def test_the_driver_re_forms_when_a_member_reports_its_generation_broken_without_any_exit(tmp_path):
    """The runtime of a generation can break with every process alive (a network cut, a
    remote peer frozen for a while): the members report it and the driver publishes the
    same members again instead of waiting for an exit that never comes. Workers are plain
    `sleep` processes; the test plays their side of the store protocol."""
    import subprocess
    import time

    from tfring.runner.elastic_driver import ElasticJob, ElasticSettings
    from tfring.runner.output import Output

    server = _core.StoreServer("127.0.0.1", 0, SECRET)
    store = _core.StoreClient("127.0.0.1", server.port, SECRET, 5.0)
    procs = []

    def start_worker(wid, host):
        procs.append(subprocess.Popen(["sleep", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      start_new_session=True))
        return procs[-1]

    messages = []
    output = Output()
    output.message = messages.append  # the launcher's own lines; the workers print nothing
    cfg = ElasticSettings(min_np=2, max_np=None, initial_np=None, reset_limit=None, elastic_timeout_s=30,
                          discovery_interval_s=0.1, grace_period_s=1, stopped_limit_s=0, ready_timeout_s=30)
    job = ElasticJob(output, store, discovery.FixedDiscovery([Host("127.0.0.1", 1), Host("127.0.0.2", 1)]),
                     discovery.Blacklist(), start_worker, cfg)
    result = {}
    driver = threading.Thread(target=lambda: result.update(code=job.run(_NoSignals())), daemon=True)
    driver.start()

    def wait_for(condition, what):
        deadline = time.monotonic() + 20
        while not condition():
            assert time.monotonic() < deadline, f"timed out waiting for {what}: {messages}"
            time.sleep(0.02)

    try:
        wait_for(lambda: len(procs) == 2, "two workers started")
        for wid in ("w0", "w1"):
            store.add(protocol.ready_key(wid), 1)
        wait_for(lambda: store.add(protocol.CURRENT, 0) == 1, "generation 1")
        store.add(protocol.broken_key(1), 1)  # w0 lost the job; nobody exited
        wait_for(lambda: store.add(protocol.CURRENT, 0) == 2, "generation 2")
        gen2 = protocol.Assignment.decode(store.get(protocol.assignment_key(2, "w1"), 1.0))
        assert (gen2.slot.rank, gen2.slot.size) == (1, 2)
        assert any("generation 2: 2 worker(s) (a worker found generation 1 broken)" in m for m in messages)
        store.add(protocol.broken_key(1), 1)  # a late report about a generation already replaced
        time.sleep(1.0)
        assert store.add(protocol.CURRENT, 0) == 2
    finally:
        for p in procs:
            p.kill()
        driver.join(20)
        server.stop()
    # Both workers then died: both hosts are blacklisted for good, so the job ends at once.
    assert result.get("code") == 1, messages
    assert any(m.startswith("ending the elastic job: 0 worker(s) can ever run") for m in messages), messages
