"""Fault matrix, Keras part: a rank SIGKILLed during `model.fit`, and rank 0 SIGKILLed in the
middle of writing a checkpoint. Every survivor must end with an error naming the dead rank,
fast; the launcher exits with the victim's signal naming it; the last complete checkpoint
stays loadable. The scripts print the same T0/ERR lines as test_faults.py (whose `_times`
reads them); tests/measure/faults.py reuses them to measure the delays many times."""

import json
import os

import pytest

from tests.helpers import format_job_output, rank_output, run_job
from tests.test_faults import PRELUDE, _times

KERAS_PRELUDE = PRELUDE + """
import tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
import keras
import tfring.keras as hvd
hvd.init()
out_dir = sys.argv[2]
rng = np.random.default_rng(hvd.rank())
x = rng.standard_normal((512, 16)).astype("float32")
y = rng.integers(0, 4, 512)
model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(4)])
model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.05)),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
"""

# Rank 1 dies in its 3rd batch of epoch 1 (the 2nd epoch), after epoch 0 completed everywhere.
DURING_FIT = KERAS_PRELUDE + """
class DieInFit(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if hvd.rank() == 1 and self.epoch == 1 and batch == 2:
            fault()
    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch
try:
    model.fit(x, y, batch_size=32, epochs=4, verbose=0,
              callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0), DieInFit()])
except Exception as e:
    report(e)
"""

# Rank 0 saves after every epoch; while writing epoch 1's file it has written part of it
# when it is killed. The test then loads what is under the real name.
DURING_CHECKPOINT = KERAS_PRELUDE + """
import json
path = os.path.join(out_dir, "model.keras")
original_save = keras.Model.save
def save(self, filepath, *args, **kwargs):
    if os.path.exists(path):                    # epoch 0's checkpoint is complete: die mid-write
        with open(filepath, "wb") as f:
            f.write(b"PK\\x03\\x04" + b"partial" * 1000)
            f.flush()
        fault()
    original_save(self, filepath, *args, **kwargs)
    with open(os.path.join(out_dir, "epoch0_weights.json"), "w") as f:
        json.dump([w.tolist() for w in self.get_weights()], f)
keras.Model.save = save
try:
    model.fit(x, y, batch_size=32, epochs=4, verbose=0,
              callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                         hvd.callbacks.ModelCheckpoint(path)])
except Exception as e:
    report(e)
"""


@pytest.mark.multiprocess
@pytest.mark.timeout(120)
def test_a_rank_killed_during_fit_ends_the_survivor_fast(tmp_path):
    result = run_job(2, DURING_FIT, script_args=("fit", str(tmp_path)), timeout=90, check=False,
                     args=("--grace-period-s", "20"))
    delays, report = _times(result, 2)
    assert result.returncode == 128 + 9 and "rank 1 (pid" in result.stderr, report
    delay, kind, message = delays[0]
    # Keras surfaces the op's error as the tf.errors class of PeerLostError
    assert kind == "UnavailableError" and "rank 1" in message, report
    assert delay < 10, report


@pytest.mark.multiprocess
@pytest.mark.timeout(120)
def test_rank_0_killed_while_saving_leaves_the_last_checkpoint_loadable(tmp_path):
    import keras
    import numpy as np

    result = run_job(2, DURING_CHECKPOINT, script_args=("checkpoint", str(tmp_path)), timeout=90, check=False,
                     args=("--grace-period-s", "20"))
    delays, report = _times(result, 2, victim=0)
    assert result.returncode == 128 + 9 and "rank 0 (pid" in result.stderr, report
    delay, kind, message = delays[1]
    assert kind == "UnavailableError" and "rank 0" in message, report
    assert delay < 10, report
    # the partial file exists only under its temporary name; the real name holds epoch 0
    leftovers = sorted(os.listdir(tmp_path))
    assert "model.keras" in leftovers and any(".tmp-" in name for name in leftovers), leftovers
    with open(tmp_path / "epoch0_weights.json") as f:
        expected = [np.array(w) for w in json.load(f)]
    loaded = keras.models.load_model(tmp_path / "model.keras", compile=False)
    for got, want in zip(loaded.get_weights(), expected):
        np.testing.assert_array_equal(got, want)
    assert "rank 0" in rank_output(result.stdout, 1), format_job_output(result.stdout, result.stderr)
