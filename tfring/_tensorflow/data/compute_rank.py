"""Where a rank of the tf.data compute job runs: its rank and the job's size (from the
launcher's environment) and the address training ranks reach its servers at. Used by the
compute job's entry point (compute_worker) and by every compute rank's body
(compute_service.compute_worker_fn); reads the environment only, imports nothing of tfring.
"""

import os
import socket


def rank_and_size():
    """This compute rank and the job size, from tfringrun's environment (0 and 1 alone)."""
    return int(os.environ.get("TFRING_RANK", "0")), int(os.environ.get("TFRING_SIZE", "1"))


def this_host():
    """The address training ranks use to reach this host's tf.data servers: TFRING_BIND_ADDR
    when set (``tfringrun --bind-addr`` / ``--network-interface``), else this host's name's."""
    return os.environ.get("TFRING_BIND_ADDR") or socket.gethostbyname(socket.getfqdn())
