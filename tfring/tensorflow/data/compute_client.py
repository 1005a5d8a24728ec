"""The compute job's registry: where each tf.data dispatcher listens, how many workers have
joined it, and when the whole compute job should stop. It lives in an authenticated tfring
store served by rank 0 of the compute job (``rendezvous.Store``); the address and the
secret travel in the ``TfDataServiceConfig`` file.

Keys: ``dispatcher/<i>`` (its target, ``grpc://host:port``), ``workers/<i>`` (a counter),
``shutdown``. Every wait takes a timeout and raises ``TimeoutError`` naming what did not
come. Thread-safety: one lock serializes the requests of a client.
"""

import threading
import time

POLL_S = 0.1
SHUTDOWN_POLL_S = 5.0


class ComputeClient:
    """A connection to the compute job's registry.

    Args:
      address: ``(host, port)`` of the registry store.
      key: the job secret (bytes or hex text).
      verbose: > 1 prints each registration.
    """

    def __init__(self, address, key, verbose=1):
        from tfring import _core

        host, port = address
        secret = key.decode() if isinstance(key, bytes) else key
        self._client = _core.StoreClient(host, int(port), secret, 30.0)
        self._lock = threading.Lock()
        self._verbose = verbose

    def _say(self, text):
        if self._verbose > 1:
            print(f"tfring compute service: {text}", flush=True)

    def register_dispatcher(self, index, target):
        with self._lock:
            self._client.set(f"dispatcher/{index}", target.encode())
        self._say(f"dispatcher {index} at {target}")

    def wait_for_dispatcher_registration(self, index, timeout):
        """The target of dispatcher ``index``; waits up to ``timeout`` seconds."""
        from tfring import errors

        try:
            with self._lock:
                return self._client.get(f"dispatcher/{index}", float(timeout)).decode()
        except errors.TimeoutError:
            raise TimeoutError(f"tf.data dispatcher {index} did not register within {timeout} s: is the compute job "
                               "running (tfringrun -np N python -m tfring.tensorflow.data.compute_worker CONFIG), and "
                               "with dispatcher_side='training', does training rank "
                               f"{index} run tf_data_service()?") from None

    def register_worker_for_dispatcher(self, index, worker_index):
        with self._lock:
            self._client.add(f"workers/{index}", 1)
        self._say(f"worker {worker_index} joined dispatcher {index}")

    def wait_for_dispatcher_worker_registration(self, index, workers, timeout):
        """Waits up to ``timeout`` seconds until ``workers`` workers joined dispatcher ``index``."""
        deadline = time.monotonic() + float(timeout)
        while True:
            with self._lock:
                joined = self._client.add(f"workers/{index}", 0)
            if joined >= workers:
                return
            if time.monotonic() >= deadline:
                raise TimeoutError(f"only {joined} of {workers} tf.data workers joined dispatcher {index} within "
                                   f"{timeout} s: see the compute job's output")
            time.sleep(POLL_S)

    def shutdown(self):
        """Asks every compute worker to stop (the training side calls it when done)."""
        with self._lock:
            self._client.set("shutdown", b"1")

    def wait_for_shutdown(self):
        """Blocks until ``shutdown()`` was called, or the registry is gone (its rank ended)."""
        from tfring import errors

        while True:
            try:
                with self._lock:
                    self._client.get("shutdown", SHUTDOWN_POLL_S)
                return
            except errors.TimeoutError:
                continue
            except errors.TfringError:  # the store's rank stopped: nothing left to serve
                return
