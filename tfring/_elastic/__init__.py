"""Elastic training, all of it (private): what ``tfringrun --min-np/--max-np/
--host-discovery-script`` runs and what its workers call. The layer above the launcher
(tfring/runner/, which it uses); tests/test_python_layers.py keeps it so.

  protocol.py     the store keys and encodings the driver and its workers share
  driver.py       the driver: membership and generations, the workers' processes, the store
  phases.py       the job's phases, a checked state machine
  timers.py       the re-formation timers, on an injectable clock
  launch.py       command line to driver (tfringrun calls it through the provider
                  ``elastic_launch``, tfring/_bootstrap/providers.py)
  worker.py       a worker's side of the rendezvous (``init()`` calls it: ``elastic_join``)
  exceptions.py   HostsUpdatedInterrupt, JobEndedError, HorovodInternalError
  state.py        State and ObjectState, framework-neutral
  run.py          the restore / re-form / sync loop
  tf_state.py     TensorFlow states and ``run`` (``hvd.elastic`` of tfring.tensorflow)
  keras_state.py  KerasState and the Keras callbacks (``hvd.elastic`` of tfring.keras)

Public faces, which bind their names from tfring/_api/exports.py: ``tfring.elastic``,
``tfring.tensorflow.elastic`` and ``tfring.keras.elastic``. docs/elastic.md has the user's
view.
"""
