"""Elastic jobs, the parts that need no worker processes (issue 18): the discovery script's
format and failures, the blacklist's cooldown, the store protocol a worker joins through
(against a real store), and the run wrapper outside an elastic job (fail fast, as before)."""

import os
import shlex
import signal
import threading
import time

import pytest

from tfring import _core
from tfring import _errors as errors
from tfring._elastic import protocol
from tfring._elastic import worker as elastic_worker
from tfring._elastic.exceptions import JobEndedError
from tfring._runner import discovery
from tfring._runner.hosts import Host, slots_of
from tfring.elastic import ObjectState, run_fn

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
    # A member left out of a later generation is told so (the driver stops such workers),
    # and says it leaves first: its exit is then a departure, not a loss.
    _publish(driver, 3, {"w0": "a"})
    assert not driver.add(protocol.left_key("w5"), 0)
    with pytest.raises(JobEndedError, match="worker w5 is not part of generation 3"):
        elastic_worker.join_settings(timeout_s=5)
    assert driver.add(protocol.left_key("w5"), 0) == 1


def test_a_waiting_worker_learns_why_the_driver_ended_the_job(elastic_store):
    elastic_store.set(protocol.END_REASON, b"only 1 worker(s) could run for 3 s (--elastic-timeout)")
    elastic_store.add(protocol.ENDED, 1)
    with pytest.raises(JobEndedError, match=r"ended the job: only 1 worker\(s\) could run") as info:
        elastic_worker.join_settings(timeout_s=5)
    assert isinstance(info.value, errors.AbortedError)


def _finish_job(driver):
    """What the driver writes when a worker finished training."""
    driver.add(protocol.FINISHED, 1)
    driver.set(protocol.END_REASON, b"w0 finished training; the job re-forms no more")
    driver.add(protocol.ENDED, 1)


def test_a_worker_that_never_joined_a_finished_job_exits_0_with_one_line(elastic_store, capsys):
    _finish_job(elastic_store)
    with pytest.raises(SystemExit) as info:
        elastic_worker.init_core(lambda settings: pytest.fail("no rendezvous for a finished job"))
    assert info.value.code == 0
    err = capsys.readouterr().err
    assert err == ("tfring elastic: worker w5: the job finished before this worker joined it (w0 finished "
                   "training; the job re-forms no more); leaving without training\n")


def test_a_worker_that_trained_and_finds_the_job_finished_at_its_reset_raises(elastic_store):
    """It was part of the job (e.g. it lost a peer after another worker finished): that is
    not a quiet leave, JobEndedError as before (the driver counts its failure)."""
    _publish(elastic_store, 1, {"w5": "a"})
    joined = []
    elastic_worker.init_core(joined.append)
    assert joined[0]["TFRING_RANK"] == "0" and elastic_store.add(protocol.joined_key("w5"), 0) == 1
    _finish_job(elastic_store)
    with pytest.raises(JobEndedError, match="ended the job: w0 finished training"):
        elastic_worker.init_core(joined.append)


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


def _settings(**changes):
    from tfring._elastic.driver import ElasticSettings

    return ElasticSettings(**{"min_np": 2, "max_np": None, "initial_np": None, "reset_limit": None,
                              "elastic_timeout_s": 30, "discovery_interval_s": 0.1, "grace_period_s": 1,
                              "stopped_limit_s": 0, "ready_timeout_s": 30, **changes})


class _Driver:
    """An ``ElasticJob`` running in a thread against a real store; the test plays the
    workers' side of the store protocol. Workers are small shell processes:
    ``command(wid, host)`` gives each one's argv (default: ``sleep 60``). The launcher's
    own lines go to ``messages``; the workers' output is read as tfringrun reads it."""

    def __init__(self, hosts, command=None, discovery_=None, blacklist=None, **settings):
        import subprocess

        from tfring._elastic.driver import ElasticJob, OutputTails
        from tfring._runner.output import Output

        self.server = _core.StoreServer("127.0.0.1", 0, SECRET)
        self.store = _core.StoreClient("127.0.0.1", self.server.port, SECRET, 5.0)
        self.procs = {}
        command = command or (lambda wid, host: ["sleep", "60"])

        def start_worker(wid, host):
            self.procs[wid] = subprocess.Popen(command(wid, host), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                               start_new_session=True)
            return self.procs[wid]

        self.messages = []
        tails = OutputTails()
        output = Output(stdout=open(os.devnull, "w"), stderr=open(os.devnull, "w"),  # noqa: SIM115
                        observer=tails.observe)
        output.message = self.messages.append
        self.job = ElasticJob(output, self.store,
                              discovery_ or discovery.FixedDiscovery([Host(h, 1) for h in hosts]),
                              blacklist or discovery.Blacklist(), start_worker, _settings(**settings), tails=tails)
        self.result = {}
        self.thread = threading.Thread(target=lambda: self.result.update(code=self.job.run(_NoSignals())),
                                       daemon=True)
        self.started = time.monotonic()
        self.thread.start()

    def wait_for(self, condition, what, timeout=20):
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, f"timed out waiting for {what}: {self.messages}"
            time.sleep(0.02)

    def ready(self, *wids):
        for wid in wids:
            self.store.add(protocol.ready_key(wid), 1)

    def generation(self):
        return self.store.add(protocol.CURRENT, 0)

    def finish(self, timeout=20):
        """Waits for the job to end; returns its exit code (None: it did not end)."""
        self.thread.join(timeout)
        return self.result.get("code")

    def close(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
        self.thread.join(20)
        self.server.stop()


def test_the_driver_re_forms_when_a_member_reports_its_generation_broken_without_any_exit():
    """The runtime of a generation can break with every process alive (a network cut, a
    remote peer frozen for a while): the members report it and the driver publishes the
    same members again instead of waiting for an exit that never comes."""
    d = _Driver(["127.0.0.1", "127.0.0.2"])
    try:
        d.wait_for(lambda: len(d.procs) == 2, "two workers started")
        d.ready("w0", "w1")
        d.wait_for(lambda: d.generation() == 1, "generation 1")
        d.store.add(protocol.broken_key(1), 1)  # w0 lost the job; nobody exited
        d.wait_for(lambda: d.generation() == 2, "generation 2")
        gen2 = protocol.Assignment.decode(d.store.get(protocol.assignment_key(2, "w1"), 1.0))
        assert (gen2.slot.rank, gen2.slot.size) == (1, 2)
        assert any("generation 2: 2 worker(s) (a worker found generation 1 broken)" in m for m in d.messages)
        d.store.add(protocol.broken_key(1), 1)  # a late report about a generation already replaced
        time.sleep(1.0)
        assert d.generation() == 2
    finally:
        d.close()
    # Both workers then died: both hosts are blacklisted for good, so the job ends at once.
    assert d.result.get("code") == 1, d.messages
    assert any(m.startswith("ending the elastic job: 0 worker(s) can ever run") for m in d.messages), d.messages


def _exits_with(code, *stderr_lines):
    """A worker's argv: prints ``stderr_lines`` to stderr and exits ``code`` (as a Python
    script dies on an import error: before init())."""
    text = "".join(f"echo {shlex.quote(line)} >&2; " for line in stderr_lines)
    return ["sh", "-c", f"{text}exit {code}"]


IMPORT_ERROR = ("Traceback (most recent call last):", '  File "/tmp/job.py", line 1, in <module>',
                "ModuleNotFoundError: No module named 'tfring_nope'")


def test_a_script_failing_before_init_on_every_worker_ends_the_job_at_once_with_its_traceback(tmp_path):
    """Every worker exits 1 before init() and no generation formed: the script's fault.
    The hosts come from a discovery script (a blacklisted host may come back, so the old
    driver waited --elastic-timeout, 60 s here); the job now ends at once with the
    workers' code and the traceback."""
    script = tmp_path / "discover.sh"
    script.write_text("#!/bin/sh\necho 127.0.0.1\necho 127.0.0.2\n")
    script.chmod(0o755)
    d = _Driver([], command=lambda wid, host: _exits_with(1, "some TensorFlow warning", *IMPORT_ERROR),
                discovery_=discovery.ScriptDiscovery(str(script), 1, print), elastic_timeout_s=60)
    try:
        code = d.finish(timeout=15)
        took = time.monotonic() - d.started
    finally:
        d.close()
    report = "\n".join(d.messages)
    assert code == 1, report
    assert took < 15, report
    assert ("ending the elastic job: every worker started so far (w0 on 127.0.0.1, w1 on 127.0.0.2) exited with "
            "code 1 before calling init(), and no generation has formed: the script fails before init()") in report
    shown = d.messages[d.messages.index("the last lines of worker w0's output:") + 1:]
    assert shown == [f"  {line}" for line in IMPORT_ERROR], report  # from the traceback on
    assert "waiting up to 60 s" not in report, report


def test_a_failure_before_init_beside_a_healthy_worker_still_blacklists_the_host():
    """A host whose worker dies before init() while another worker is still starting is a
    host problem: blacklisted, the job goes on with the other hosts."""
    d = _Driver(["127.0.0.1", "127.0.0.2", "127.0.0.3"], min_np=1,
                command=lambda wid, host: ["sleep", "60"] if host == "127.0.0.1" else _exits_with(1, "boom"))
    try:
        d.wait_for(lambda: sum("before calling init()" in m for m in d.messages) == 2, "two lost workers")
        assert d.job.end_reason is None, d.messages
        assert any(m.startswith("lost worker w1 (not yet in a generation, host 127.0.0.2") and
                   m.endswith("it exited with code 1 before calling init(); host 127.0.0.2 blacklisted for the "
                              "rest of the job") for m in d.messages), d.messages
        d.ready("w0")
        d.wait_for(lambda: d.generation() == 1, "generation 1 with w0 alone")
    finally:
        d.close()


class _FakeStore:
    def add(self, key, value):
        return 0

    def set(self, key, value):
        pass


def _bare_job(exits, ready=(), generation=0):
    """A driver that runs nothing, its workers ``w<i>`` on hosts ``h<i>`` exited with
    ``exits`` (None: running), ``ready[i]`` whether worker i called init(): (job, messages)."""
    from tfring._elastic.driver import ElasticJob, ElasticWorker

    messages = []

    class _Messages:
        message = messages.append

    job = ElasticJob(_Messages(), _FakeStore(), discovery.FixedDiscovery([]), discovery.Blacklist(), None,
                     _settings())
    job.membership.generation = generation
    job.membership.workers = [ElasticWorker(f"w{i}", f"h{i}", None, 0.0, returncode=code, ready=i < len(ready) and ready[i])
                   for i, code in enumerate(exits)]
    return job, messages


@pytest.mark.parametrize("exits, generation, ready, fails", [
    ([1, 1, 1], 0, False, True),  # the rule
    ([2], 0, False, True),  # one worker started so far
    ([1, None], 0, False, False),  # another worker is still starting
    ([1, 2], 0, False, False),  # different failures: not one script's
    ([1, -9], 0, False, False),  # killed: out of memory, preempted, the driver's ready timeout
    ([255, 255], 0, False, False),  # ssh could not reach the host
    ([137, 137], 0, False, False),  # a remote worker killed by a signal (128 + N)
    ([1, 1], 0, True, False),  # one of them called init()
    ([1, 1], 1, False, False),  # a generation formed: the script can run
])
def test_the_rule_for_a_script_that_fails_before_init(exits, generation, ready, fails):
    job, _ = _bare_job(exits, ready=[ready], generation=generation)
    assert job._script_fails() is fails
    assert (job.end_reason is not None) is fails and job.end_code == (exits[0] if fails else 1)


def test_a_script_failure_on_many_workers_names_the_first_eight():
    job, messages = _bare_job([1] * 12)
    assert job._script_fails()
    assert "(w0 on h0, w1 on h1, w2 on h2, w3 on h3, w4 on h4, w5 on h5, w6 on h6, w7 on h7 and 4 more) exited " \
        "with code 1 before calling init()" in messages[0], messages


def _waits_for_exit_file(directory):
    """Workers that run until the test writes ``directory/<wid>`` holding their exit code."""
    def command(wid, host):
        path = directory / wid
        return ["sh", "-c", f"while [ ! -e {path} ]; do sleep 0.02; done; exit $(cat {path})"]
    return command


def test_a_worker_that_never_joined_when_the_job_finished_leaves_and_the_job_succeeds(tmp_path):
    """w2 is in generation 2, which the others never joined (they finished training in
    generation 1 before their next commit): its rendezvous can never complete. Once w0
    finishes, the driver tells the workers the job finished and stops w2 if it has not
    left by itself; the job exits 0."""
    d = _Driver(["127.0.0.1", "127.0.0.2", "127.0.0.3"], command=_waits_for_exit_file(tmp_path), initial_np=2)
    try:
        d.wait_for(lambda: len(d.procs) == 2, "two workers started")
        d.ready("w0", "w1")
        d.wait_for(lambda: d.generation() == 1, "generation 1")
        for wid in ("w0", "w1"):
            d.store.add(protocol.joined_key(wid), 1)  # their rendezvous succeeded
        d.wait_for(lambda: len(d.procs) == 3, "w2 started on the third host")
        d.ready("w2")
        d.wait_for(lambda: d.generation() == 2, "generation 2 with w2")
        (tmp_path / "w0").write_text("0")
        d.wait_for(lambda: d.store.add(protocol.ENDED, 0), "the job finishing")
        assert d.store.add(protocol.FINISHED, 0) == 1
        (tmp_path / "w1").write_text("0")
        code = d.finish()
    finally:
        d.close()
    report = "\n".join(d.messages)
    assert code == 0, report
    assert d.procs["w2"].returncode == -signal.SIGTERM, report  # blocked in its rendezvous: stopped
    assert any(m.startswith("worker w2 (rank 2 of 3 in generation 2, host 127.0.0.3") and
               m.endswith("had not joined the job when it finished; it leaves without training")
               for m in d.messages), report
    assert "has not left" not in report and "after another worker had finished" not in report, report


def test_rank_0_reports_the_ranks_a_failed_rendezvous_never_saw():
    message = ("tfring init on rank 0: no roster entry from rank(s) 2, 3: never started or never reached the "
               "job's store (4 ranks expected; TFRING_START_TIMEOUT_S)")
    elastic_worker.note_missing(0, message)
    assert elastic_worker._lost == [2, 3]
    elastic_worker.note_missing(1, message)  # only rank 0's view counts (its side holds the job)
    assert elastic_worker._lost == []
    elastic_worker.note_missing(0, "rank 1 (host h) has not answered for 3.0 s")
    assert elastic_worker._lost == []
