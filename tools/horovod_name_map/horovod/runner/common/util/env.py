"""``get_env_rank_and_size``, which Horovod's test_tensorflow_process_sets.py imports: the
rank and size the launcher gave this process (tfringrun's TFRING_RANK/TFRING_SIZE, else
MPI's), or None before any launcher."""

import os

_PAIRS = (("TFRING_RANK", "TFRING_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
          ("PMI_RANK", "PMI_SIZE"))


def get_env_rank_and_size():
    for rank, size in _PAIRS:
        if rank in os.environ and size in os.environ:
            return int(os.environ[rank]), int(os.environ[size])
    return None
