"""``in_thread``, which Horovod's test/utils/common.py imports (unused by the TF tests)."""

import threading


def in_thread(target, args=(), name=None, daemon=True, silent=False):
    del silent
    thread = threading.Thread(target=target, args=args, name=name, daemon=daemon)
    thread.start()
    return thread
