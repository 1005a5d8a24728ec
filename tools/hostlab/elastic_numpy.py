"""A light elastic worker (NumPy API, no TensorFlow: ~40 MB and no 5 s import), for elastic
jobs under host-level faults (tests/test_host_faults.py, lab/scale/host_soak.py).

    python elastic_numpy.py '<json config>' OUT_DIR

Trains a linear least-squares model by data-parallel gradient descent under
``tfring.elastic.run_fn``: every step each rank computes the gradient on its shard
(rank::size) of a fixed data set, the gradients are averaged (``allreduce``), every rank
applies the same update. ``ObjectState(w, step)`` is committed every ``commit_every`` steps;
a lost member makes the survivors restore the last commit, re-form and sync from the new
rank 0. Config keys: steps (total), commit_every, sleep_s (per step), dim, stop_file (the
job ends at the first commit after this file appears: rank 0 looks, every rank follows).

Lines printed (for the test and the soak's report):
  ``PROGRESS worker=w3 step=120 size=6 t=<time>`` at every commit (rank 0 only);
  ``RESTORED worker=... step=<committed step> lost=<steps undone> t=<time>`` when the job
  lost a member; ``RESET worker=... rank=... size=... step=... t=<time>`` after every
  re-formation (before the sync);
  ``FINAL worker=... rank=... size=... step=... executed=<steps this worker ran> sha=<digest>``.
OUT_DIR/final_<worker>.npy holds its final weights.
"""

import hashlib
import json
import os
import pickle
import sys
import time

import numpy as np

import tfring
from tfring.elastic import ObjectState, run_fn

cfg = json.loads(sys.argv[1])
out_dir = sys.argv[2]
worker = os.environ["TFRING_ELASTIC_WORKER"]
dim = cfg.get("dim", 32)
rng = np.random.default_rng(0)
x = rng.standard_normal((240, dim))
y = x @ rng.standard_normal(dim)
lr = 0.05
executed = 0


def bcast_object(obj):
    """``obj`` from rank 0 on every rank (pickled; its length first, then its bytes)."""
    data = np.frombuffer(pickle.dumps(obj), np.uint8) if tfring.rank() == 0 else np.zeros(0, np.uint8)
    length = tfring.broadcast(np.array([data.size], np.int64), 0, name="state.length")
    buf = data.copy() if tfring.rank() == 0 else np.zeros(int(length[0]), np.uint8)
    return pickle.loads(tfring.broadcast(buf, 0, name="state.bytes").tobytes())


class State(ObjectState):
    def restore(self):
        lost = self.step - self._saved_state["step"]
        super().restore()
        print(f"RESTORED worker={worker} step={self.step} lost={lost} t={time.time():.6f}", flush=True)


tfring.init()
# Different starting weights on every worker: the first sync must make them rank 0's.
state = State(bcast_object, tfring.rank, w=np.random.default_rng(tfring.rank() + 1).standard_normal(dim), step=0)


def on_reset():
    print(f"RESET worker={worker} rank={tfring.rank()} size={tfring.size()} step={state.step} t={time.time():.6f}",
          flush=True)


state.register_reset_callbacks([on_reset])


@run_fn
def train(state):
    global executed
    while state.step < cfg["steps"]:
        xs, ys = x[tfring.rank()::tfring.size()], y[tfring.rank()::tfring.size()]
        grad = 2 * xs.T @ (xs @ state.w - ys) / len(x) * tfring.size()
        state.w = state.w - lr * tfring.allreduce(grad, op=tfring.Average, name="grad")
        state.step += 1
        executed += 1
        time.sleep(cfg.get("sleep_s", 0.0))
        if state.step % cfg["commit_every"] == 0:
            state.commit()
            if tfring.rank() == 0:
                print(f"PROGRESS worker={worker} step={state.step} size={tfring.size()} t={time.time():.6f}",
                      flush=True)
            stop = int(tfring.rank() == 0 and os.path.exists(cfg.get("stop_file") or "/nonexistent"))
            if tfring.broadcast(np.array([stop], np.int64), 0, name="stop")[0]:
                break


train(state)
np.save(os.path.join(out_dir, f"final_{worker}.npy"), state.w)
print(f"FINAL worker={worker} rank={tfring.rank()} size={tfring.size()} step={state.step} executed={executed} "
      f"sha={hashlib.sha1(state.w.tobytes()).hexdigest()[:16]}", flush=True)
