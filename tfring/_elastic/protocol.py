"""What an elastic job's driver (``tfringrun --min-np ...``) and its workers say to each
other through the job's store. No TF, no I/O of its own: key names and encodings only.

A *generation* is one membership of the job: which worker processes take part and the
rank of each. The driver publishes generation g by writing every member's assignment
(``assignment_key(g, worker)``) and then raising the ``CURRENT`` counter to g, so a worker
that sees ``CURRENT == g`` finds its assignment already there. Each generation runs under
its own ``TFRING_JOB_ID`` (``job_id(base, g)``): its rendezvous keys, and the session its
connections name, are its own, so a process still in an earlier generation is never mixed
into a later one.

A worker the driver starts is included in a generation only once it is *ready*: it has
imported what it needs and called ``init()`` (``ready_key``). A worker that crashes while
starting therefore never holds up the running ones.

Keys (all under ``elastic/``):
  ``ready/<worker>``     counter: 1 once the worker waits for its first generation
  ``current``            counter: the latest published generation (0: none yet)
  ``broken/<g>``         counter: how many workers found generation g broken (a member lost
                         while training, or a rendezvous that failed); the driver re-forms
                         the job when it is above 0 for the current generation, even if no
                         process exited (a frozen remote peer, a network cut)
  ``broken/<g>/<worker>`` counter: above 0 once that worker reported generation g broken
                         (it is alive and reaches the store), written before ``broken/<g>``
  ``lost/<g>/<rank>``    counter: above 0 when rank 0 of generation g lost that rank (its
                         error named it, or its failed rendezvous never saw the rank reach
                         the store); written before ``broken/<g>``. The driver leaves
                         such a worker out of the next generation even if its process has not
                         exited (a host frozen or cut off: it cannot take part in a
                         rendezvous), and the workers of its host that did not report
  ``gen/<g>/<worker>``   JSON assignment of ``worker`` in generation g
  ``joined/<worker>``    counter: how many generations the worker has joined (its
                         rendezvous succeeded); 0 for a worker that never trained
  ``left/<worker>``      counter: 1 once the worker found itself left out of the newest
                         generation and leaves (written before it raises JobEndedError):
                         the driver then takes its exit for a departure, not a loss
  ``finished``           counter: 1 once a worker finished training (the job succeeded),
                         written before ``ended``: a worker that never joined a generation
                         then leaves with exit code 0 instead of raising JobEndedError
  ``ended``              counter: 1 once the driver has ended the job
  ``end_reason``         why it ended (text), written before ``ended``
"""

import dataclasses
import json

from tfring._bootstrap import launch_env
from tfring._runner.hosts import Slot

WORKER_ENV = launch_env.ELASTIC_WORKER  # the worker's id, set by the driver; marks an elastic worker
HOST_ENV = "TFRING_ELASTIC_HOST"  # the host the driver started the worker for
CURRENT = "elastic/current"
ENDED = "elastic/ended"
FINISHED = "elastic/finished"
END_REASON = "elastic/end_reason"


def ready_key(worker):
    return f"elastic/ready/{worker}"


def joined_key(worker):
    return f"elastic/joined/{worker}"


def left_key(worker):
    return f"elastic/left/{worker}"


def broken_key(generation):
    return f"elastic/broken/{generation}"


def broken_by_key(generation, worker):
    return f"elastic/broken/{generation}/{worker}"


def lost_key(generation, rank):
    return f"elastic/lost/{generation}/{rank}"


def assignment_key(generation, worker):
    return f"elastic/gen/{generation}/{worker}"


def job_id(base, generation):
    """The TFRING_JOB_ID of generation ``generation`` of the job whose own id is ``base``."""
    return f"{base}.elastic{generation}"


@dataclasses.dataclass(frozen=True)
class Assignment:
    """A worker's place in one generation: its rank's ``Slot`` (host and identity)."""

    generation: int
    slot: Slot

    def encode(self):
        return json.dumps({"generation": self.generation, **dataclasses.asdict(self.slot)}, sort_keys=True).encode()

    @classmethod
    def decode(cls, data):
        fields = json.loads(data.decode() if isinstance(data, bytes) else data)
        return cls(fields["generation"], Slot(**{f.name: fields[f.name] for f in dataclasses.fields(Slot)}))

    def settings(self, base_job_id):
        """The init settings of this assignment: identity and the generation's job id."""
        return {**self.slot.env(), "TFRING_JOB_ID": job_id(base_job_id, self.generation)}
