"""Training state that survives a change of the job's membership (Horovod's ``State``).

A state object holds what must be the same on every rank (weights, optimizer slots, the
epoch and batch counters) and three copies of it: the live one, the last *committed* one
(``commit()`` / ``save()``: host memory, local to this rank) and, after a reset, the one of
the new rank 0 (``sync()``). The ``run`` wrapper (run.py) restores the committed copy when
the job loses a member and syncs it from rank 0 after every re-formation.

Subclasses implement ``save``, ``restore`` and ``sync``. ``commit`` is collective: every
rank must call it at the same point (it agrees on host updates with a broadcast from rank
0, so that every rank raises ``HostsUpdatedInterrupt`` at the same commit).

Thread-safety: one training thread per process, like the collectives it calls.
"""

import copy

from tfring._basics import basics
from tfring._elastic import worker
from tfring._elastic.exceptions import HostsUpdatedInterrupt


class State:
    """Base class.

    Args:
      bcast_object: ``f(obj) -> obj`` broadcasting a picklable object from rank 0.
      get_rank: ``f() -> int``, this process's rank now (it changes across resets).
    """

    def __init__(self, bcast_object, get_rank):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._reset_callbacks = []

    def register_reset_callbacks(self, callbacks):
        """Functions called (without arguments) after every re-formation of the job, once
        the new membership is known and before the state is synced: e.g. scale the learning
        rate by the new ``size()`` or re-shard the data by the new ``rank()``."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Saves the state (``save``) as the point to return to if the job loses a member,
        then checks for host updates (``check_host_updates``). Collective.

        A commit copies every tracked value to host memory: commit often enough that little
        is lost, rarely enough that the copies stay cheap (docs/elastic.md has the costs).

        Raises:
          HostsUpdatedInterrupt: on every rank, when the driver published a new membership.
        """
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """Raises ``HostsUpdatedInterrupt`` on every rank when the driver has published a
        membership newer than the one this job runs. Collective: rank 0 reads the store and
        broadcasts what it read, so every rank decides alike. Does nothing outside an
        elastic job."""
        if worker.worker_id() is None or not basics.is_initialized():
            return
        newest = worker.current_generation() if self._rank() == 0 else 0
        newest = self._bcast_object(newest)
        if newest > worker.joined_generation():
            raise HostsUpdatedInterrupt(skip_sync=False)

    def save(self):
        """Copies the live state to this rank's committed copy."""
        raise NotImplementedError

    def restore(self):
        """Sets the live state back to the committed copy (undoing what was not committed)."""
        raise NotImplementedError

    def sync(self):
        """Makes the live state rank 0's on every rank (and commits it). Collective."""
        raise NotImplementedError


class ObjectState(State):
    """State made of picklable Python values, given as keyword arguments and exposed as
    attributes: ``state = ObjectState(bcast, get_rank, epoch=0, batch=0)``, then
    ``state.epoch += 1``."""

    def __init__(self, bcast_object, get_rank, **kwargs):
        self._saved_state = copy.deepcopy(kwargs)
        self._set_attrs()
        super().__init__(bcast_object=bcast_object, get_rank=get_rank)

    def save(self):
        self._saved_state = {name: copy.deepcopy(getattr(self, name)) for name in self._saved_state}

    def restore(self):
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            self.save()
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def _set_attrs(self):
        for name, value in self._saved_state.items():
            setattr(self, name, copy.deepcopy(value))
