"""The core layer (private): what ``import tfring`` gives without TensorFlow.

  basics                 init, shutdown, rank/size, config, stats, the timeline
  ops                    collectives on NumPy arrays, reduce ops
  process_sets           ProcessSet and the process-set table
  capabilities           Horovod's build queries (nccl_built, mpi_enabled, ...)
  gpu                    what GPU support tfring can use here (gpu_info)
  monitoring             metrics per interval from the core's counters
  environment_discovery  rank and size from a scheduler's environment (Slurm, MPI, ...)
  horovod_settings       HOROVOD_* settings read as TFRING_* ones
  auto_names             names for unnamed collectives

Faces: ``tfring`` and ``tfring.monitoring`` bind from tfring/_api/exports.py.
"""

__version__ = "0.1.0"  # tfring.__version__; setup.py carries the same string
