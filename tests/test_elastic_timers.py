"""The elastic job's re-formation timers (tfring/_elastic/timers.py): the table of
waits and its check, each deadline on a fake clock (one step before it and at it), and the
driver (ElasticJob) asking them: a broken generation settles, the job waits below --min-np
then ends, a growth waits for the current generation. No processes; an in-memory store."""

import types

import pytest

from tests.test_elastic_departures import _job
from tfring._elastic import protocol
from tfring._elastic.driver import ElasticWorker
from tfring._elastic.timers import (
    BROKEN_SETTLE_S,
    GROW_SETTLE_S,
    WAIT_MOVES,
    ReformationTimers,
    Wait,
    WaitError,
    check_wait_move,
)

ELASTIC_TIMEOUT_S, DISCOVERY_S, READY_TIMEOUT_S = 30.0, 2.0, 10.0
EPS = 1e-6


class _Clock:
    def __init__(self, now=100.0):
        self.now = now

    def __call__(self):
        return self.now


def _timers():
    clock = _Clock()
    return ReformationTimers(ELASTIC_TIMEOUT_S, DISCOVERY_S, READY_TIMEOUT_S, clock), clock


def test_every_wait_returns_to_none_and_only_none_starts_one():
    assert set(WAIT_MOVES) == set(Wait)
    for wait, targets in WAIT_MOVES.items():
        assert wait not in targets, wait  # a wait is never restarted by a move to itself
        assert wait is Wait.NONE or Wait.NONE in targets, wait
    assert WAIT_MOVES[Wait.NONE] == set(Wait) - {Wait.NONE}
    assert check_wait_move(Wait.HOLDING_GROWTH, Wait.BELOW_MIN_NP) is Wait.BELOW_MIN_NP  # a member lost meanwhile
    with pytest.raises(WaitError, match="no move from SETTLING to BELOW_MIN_NP .allowed: NONE."):
        check_wait_move(Wait.SETTLING, Wait.BELOW_MIN_NP)


def test_discovery_runs_at_once_then_every_interval():
    timers, clock = _timers()
    assert timers.discovery_due()
    assert not timers.discovery_due()
    clock.now += DISCOVERY_S - EPS
    assert not timers.discovery_due()
    clock.now += EPS
    assert timers.discovery_due() and not timers.discovery_due()
    clock.now += 3 * DISCOVERY_S  # a late tick: the next one is an interval after it, not before
    assert timers.discovery_due()
    clock.now += DISCOVERY_S - EPS
    assert not timers.discovery_due()


def test_a_broken_generation_settles_before_the_driver_may_form():
    timers, clock = _timers()
    assert timers.may_form() and timers.wait is Wait.NONE
    timers.broken_reported()
    assert timers.wait is Wait.SETTLING
    clock.now += BROKEN_SETTLE_S - EPS
    assert not timers.may_form() and timers.wait is Wait.SETTLING
    clock.now += EPS
    assert timers.may_form() and timers.wait is Wait.NONE
    with pytest.raises(WaitError, match="no move from SETTLING to HOLDING_GROWTH"):
        timers.broken_reported()
        timers.hold_growth(formed=True, starting=False)  # the driver asks may_form() first


def test_below_min_np_times_out_after_the_elastic_timeout_and_a_new_wait_starts_afresh():
    timers, clock = _timers()
    assert not timers.min_np_timed_out()
    assert timers.below_min_np()  # the wait begins: the driver says so once
    clock.now += ELASTIC_TIMEOUT_S
    assert not timers.below_min_np() and not timers.min_np_timed_out()  # not before it has passed
    clock.now += EPS
    assert timers.min_np_timed_out()
    timers.enough_workers()
    assert timers.wait is Wait.NONE and not timers.min_np_timed_out()
    timers.enough_workers()  # nothing to end: no move
    assert timers.below_min_np()
    clock.now += ELASTIC_TIMEOUT_S
    assert not timers.min_np_timed_out()


def test_a_growth_waits_for_the_current_generation_bounded_by_the_ready_timeout():
    timers, clock = _timers()
    assert timers.hold_growth(formed=False, starting=False) and timers.wait is Wait.HOLDING_GROWTH
    clock.now += READY_TIMEOUT_S - EPS
    assert timers.hold_growth(formed=False, starting=True)
    clock.now += EPS
    assert not timers.hold_growth(formed=False, starting=True)  # long past GROW_SETTLE_S too
    assert timers.wait is Wait.NONE


def test_a_growth_waits_for_workers_still_starting_for_the_grow_settle_time():
    timers, clock = _timers()
    assert timers.hold_growth(formed=True, starting=True)
    clock.now += GROW_SETTLE_S - EPS
    assert timers.hold_growth(formed=True, starting=True)
    clock.now += EPS
    assert not timers.hold_growth(formed=True, starting=True) and timers.wait is Wait.NONE
    assert not timers.hold_growth(formed=True, starting=False)  # nothing holds it: released at once
    assert timers.wait is Wait.NONE


def test_a_dropped_or_changed_growth_ends_its_hold_and_the_next_one_waits_afresh():
    timers, clock = _timers()
    assert timers.hold_growth(formed=True, starting=True)
    clock.now += 5 * GROW_SETTLE_S
    timers.no_growth_hold()  # the change was dropped (the new worker died) or is no longer only growth
    assert timers.wait is Wait.NONE
    assert timers.hold_growth(formed=True, starting=True)  # waits its own GROW_SETTLE_S again

    assert timers.below_min_np() and timers.wait is Wait.BELOW_MIN_NP  # a member lost while holding


def _settle(job, clock, seconds):
    clock.now += seconds
    job._form_generation()
    return job.membership.generation


def test_the_driver_re_forms_a_broken_generation_only_once_it_settled():
    job, messages, _ = _job()
    job.store.add(protocol.broken_key(1), 1)
    job._check_broken()
    assert job.timers.wait is Wait.SETTLING
    assert _settle(job, job._clock, 0.0) == 1
    assert _settle(job, job._clock, BROKEN_SETTLE_S - EPS) == 1
    assert _settle(job, job._clock, EPS) == 2, messages
    assert "a worker found generation 1 broken" in messages[-1] and job.timers.wait is Wait.NONE


def test_the_driver_waits_below_min_np_for_the_elastic_timeout_then_ends_the_job():
    job, messages, _ = _job()  # --min-np 2, hosts from a discovery script
    job.on_exit(job.membership.workers[1], -9)
    job.on_exit(job.membership.workers[2], -9)
    job._form_generation()
    assert job.timers.wait is Wait.BELOW_MIN_NP
    assert "1 worker(s) ready, below --min-np 2; waiting up to 30 s" in messages[-1], messages
    job._clock.now += job.cfg.elastic_timeout_s
    job._form_generation()
    assert job.end_reason is None, messages
    job._clock.now += EPS
    job._form_generation()
    assert job.end_reason == "only 1 worker(s) could run for 30 s (--elastic-timeout), below --min-np 2"
    assert sum("waiting up to" in m for m in messages) == 1, messages


def test_the_driver_holds_a_growth_until_the_current_generation_formed():
    job, messages, _ = _job()
    proc = types.SimpleNamespace(pid=103, signal_group=lambda signum: True)
    job.membership.workers.append(ElasticWorker("w3", "h3", proc, job._clock(), ready=True))
    job._change = "worker w3 on host h3 is ready"
    assert _settle(job, job._clock, 0.0) == 1 and job.timers.wait is Wait.HOLDING_GROWTH
    assert _settle(job, job._clock, job.cfg.ready_timeout_s / 2) == 1  # generation 1's rendezvous goes on
    for w in job.membership.workers[:3]:
        job.store.add(protocol.joined_key(w.wid), 1)
    assert _settle(job, job._clock, 0.0) == 2, messages
    assert messages[-1].startswith("generation 2: 4 worker(s) (worker w3 on host h3 is ready)"), messages
