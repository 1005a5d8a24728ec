"""The elastic driver tells a worker that leaves from one that dies (issue 32): a worker
whose host the discovery script no longer lists is to leave at the job's next commit; one
that dies before it has left is a lost worker (named, its host blacklisted) whatever the
order in which the driver learns of the two events (a killed host is often unlisted before
its workers' exits are reaped). A worker that leaves (``protocol.left_key``) or that the
driver itself stopped is not lost.

The driver runs no processes here: the tests call its event handlers in each order against
an in-memory store, so every order is forced, not hoped for."""

import types

import pytest

from tfring._elastic import protocol
from tfring._elastic.driver import ElasticJob, ElasticSettings, ElasticWorker
from tfring._runner import discovery
from tfring._runner.hosts import Host

HOSTS = ["h0", "h1", "h2"]
KILLED = -9  # a local worker killed by SIGKILL (a remote one reports 137: an exit code)


class _DictStore:
    """The store calls the driver makes: counters (``add``) and values (``set``)."""

    def __init__(self):
        self.counters, self.values = {}, {}

    def add(self, key, value):
        self.counters[key] = self.counters.get(key, 0) + value
        return self.counters[key]

    def set(self, key, value):
        self.values[key] = value


class _Listed:
    """A discovery whose hosts the test changes."""

    def __init__(self, names):
        self.names = list(names)

    def hosts(self):
        return [Host(n, 1) for n in self.names]

    def describe(self):
        return "host discovery script d.sh"


class _Clock:
    """The driver's clock, moved by the test."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def _job():
    """A driver whose generation 1 runs w0, w1, w2 as ranks 0-2 on h0-h2 (remote workers:
    nothing is signalled or waited for), on a clock the test moves. Returns (job, messages,
    discovery)."""
    messages = []
    listed = _Listed(HOSTS)
    settings = ElasticSettings(min_np=2, max_np=3, initial_np=None, reset_limit=None, elastic_timeout_s=30,
                               discovery_interval_s=0.1, grace_period_s=1, stopped_limit_s=0, ready_timeout_s=30)
    job = ElasticJob(types.SimpleNamespace(message=messages.append), _DictStore(), listed, discovery.Blacklist(),
                     None, settings, clock=_Clock())
    job._hosts = listed.hosts()
    for i, host in enumerate(HOSTS):
        proc = types.SimpleNamespace(pid=100 + i, signal_group=lambda signum: True)
        job.membership.workers.append(ElasticWorker(f"w{i}", host, proc, 0.0, ready=True))
    job._publish(job.membership.members(), "start")
    assert job.membership.generation == 1 and [w.rank for w in job.membership.workers] == [0, 1, 2]
    return job, messages, listed


def _rediscover(job):
    job._clock.now += job.cfg.discovery_interval_s  # the next discovery is due
    job._discover()


def _unlist(job, listed, host):
    listed.names.remove(host)
    _rediscover(job)


def _lost_lines(messages):
    return [m for m in messages if m.startswith("lost worker")]


LOST_W2 = "lost worker w2 (rank 2 of 3 in generation 1, host h2, pid 102): it was killed by signal 9 (SIGKILL)"


@pytest.mark.parametrize("order", ["exit, then unlisted", "unlisted, then exit",
                                   "unlisted, generation 2 published without it, then exit"])
def test_a_worker_killed_with_its_host_is_lost_whichever_the_driver_learns_first(order):
    job, messages, listed = _job()
    w2 = job.membership.workers[2]
    if order == "exit, then unlisted":
        job.on_exit(w2, KILLED)
        _unlist(job, listed, "h2")
    else:
        _unlist(job, listed, "h2")
        assert w2.removed and any("host h2 is no longer listed" in m for m in messages), messages
        if "published" in order:
            job._form_generation()
            assert job.membership.generation == 2 and "generation 2: 2 worker(s)" in messages[-1], messages
        job.on_exit(w2, KILLED)
    lost = _lost_lines(messages)
    assert len(lost) == 1 and lost[0].startswith(LOST_W2), messages
    assert lost[0].endswith("host h2 blacklisted for the rest of the job"), messages
    assert job.blacklist.blocked("h2", 3.0)


def test_a_worker_that_left_its_unlisted_host_is_not_lost():
    # It found itself out of generation 2 and wrote left/<worker> before it raised
    # JobEndedError (exit code 1): a departure.
    job, messages, listed = _job()
    w2 = job.membership.workers[2]
    _unlist(job, listed, "h2")
    job._form_generation()
    job.store.add(protocol.left_key("w2"), 1)
    job.on_exit(w2, 1)
    assert _lost_lines(messages) == [] and not job.blacklist.blocked("h2", 3.0), messages


def test_a_worker_the_driver_stopped_after_its_host_was_unlisted_is_not_lost():
    # It had not left TFRING_START_TIMEOUT_S after the generation without it: the driver
    # sent SIGTERM (then SIGKILL); that exit is the driver's doing.
    job, messages, listed = _job()
    w2 = job.membership.workers[2]
    _unlist(job, listed, "h2")
    job._form_generation()
    job._stop_leavers(w2.leave_by + 1.0)
    assert w2.kill_at is not None and any("has not left; stopping it" in m for m in messages), messages
    job.on_exit(w2, KILLED)
    assert _lost_lines(messages) == [], messages


def test_a_worker_whose_host_is_listed_again_before_it_left_stays_a_member():
    job, messages, listed = _job()
    w2 = job.membership.workers[2]
    _unlist(job, listed, "h2")
    listed.names.append("h2")
    _rediscover(job)
    assert not w2.removed and not w2.unlisted, messages
    job.on_exit(w2, KILLED)  # then it dies: an ordinary lost member
    assert len(_lost_lines(messages)) == 1, messages
