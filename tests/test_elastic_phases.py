"""The elastic job's state machine (tfring/_elastic/phases.py): the table of moves,
its check, and the driver (ElasticJob) moving through it on its events: a finished worker,
a failure after it, the driver ending the job, signals. No processes; an in-memory store."""

import signal

import pytest

from tests.test_elastic_departures import _DictStore  # the driver's store calls, in memory
from tfring._elastic.driver import ElasticJob, ElasticSettings, ElasticWorker
from tfring._elastic.phases import MOVES, Phase, PhaseError, check_move
from tfring._runner import discovery


class _Proc:
    pid = 1  # never signalled: every test's workers have exited or are left alone


def _job(*exits, generation=1):
    """A driver that runs nothing, with workers w<i> (rank i of ``generation``) that
    exited with ``exits`` (None: running)."""
    messages = []

    class _Messages:
        message = messages.append

    settings = ElasticSettings(min_np=1, max_np=None, initial_np=None, reset_limit=None, elastic_timeout_s=30,
                               discovery_interval_s=0.1, grace_period_s=1, stopped_limit_s=0, ready_timeout_s=30)
    job = ElasticJob(_Messages(), _DictStore(), discovery.FixedDiscovery([]), discovery.Blacklist(), None, settings)
    job.membership.generation = generation
    job.membership.workers = [ElasticWorker(f"w{i}", f"h{i}", _Proc(), 0.0, generation=generation, rank=i, returncode=code,
                                 ready=True) for i, code in enumerate(exits)]
    return job, messages


def test_every_phase_has_its_moves_and_the_final_ones_none():
    assert set(MOVES) == set(Phase)
    assert MOVES[Phase.ENDING] == MOVES[Phase.SIGNALLED] == set()
    for phase, targets in MOVES.items():
        assert Phase.STARTING not in targets, phase  # nothing goes back to the start
        assert phase.ending or Phase.SIGNALLED in targets, phase  # a signal is taken in every other phase
        assert not targets & {Phase.STARTING, Phase.RUNNING} or phase.forms_generations, phase
    assert [p for p in Phase if p.forms_generations] == [Phase.STARTING, Phase.RUNNING]
    assert {p for p in Phase if p.finishing} == {Phase.FINISHING, Phase.FAILING_AFTER_FINISH}


def test_a_move_the_table_does_not_list_raises_naming_it():
    assert check_move(Phase.RUNNING, Phase.RUNNING) is Phase.RUNNING  # the next generation
    with pytest.raises(PhaseError, match="no move from FINISHING to RUNNING .allowed: FAILING_AFTER_FINISH, "
                                         "SIGNALLED."):
        check_move(Phase.FINISHING, Phase.RUNNING)
    with pytest.raises(PhaseError, match="no move from ENDING to SIGNALLED .allowed: none .final.."):
        check_move(Phase.ENDING, Phase.SIGNALLED)


def test_a_finished_worker_then_a_failure_move_the_job_to_finishing_then_failing():
    job, messages = _job(0, 3)
    job.phase = Phase.RUNNING
    job.on_exit(job.membership.workers[0], 0)
    assert job.phase is Phase.FINISHING and job.finishing
    job.on_exit(job.membership.workers[1], 3)
    assert job.phase is Phase.FAILING_AFTER_FINISH and job.failure_after_finish is job.membership.workers[1]
    assert job.finishing and not job.phase.ending
    assert any("after another worker had finished" in m for m in messages), messages


def test_ending_and_signals_are_final():
    job, messages = _job()
    job._end("a test ends it")
    assert job.phase is Phase.ENDING and job.end_reason == "a test ends it" and job.phase.ending
    job.on_signal(signal.SIGTERM)  # a signal while ending: every worker killed at once, no move
    assert job.phase is Phase.ENDING and job.first_signal is None
    with pytest.raises(PhaseError):
        job._end("ended twice")  # the driver never does: its callers check the phase first

    job, messages = _job(generation=0)
    assert job.phase is Phase.STARTING
    job.on_signal(signal.SIGINT)
    assert job.phase is Phase.SIGNALLED and job.first_signal == signal.SIGINT
    job.on_signal(signal.SIGTERM)
    assert job.phase is Phase.SIGNALLED and job.first_signal == signal.SIGINT
    assert any("again; killing every worker now" in m for m in messages), messages


def test_publishing_a_generation_moves_the_job_to_running():
    job, _ = _job(None, None, generation=0)
    job._publish(job.membership.workers, "a test")
    assert job.phase is Phase.RUNNING and job.membership.generation == 1
    job._publish(job.membership.workers, "again")
    assert job.phase is Phase.RUNNING and job.membership.generation == 2
