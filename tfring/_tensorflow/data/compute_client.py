"""The compute job's registry: where each tf.data dispatcher listens, how many workers have
joined it, and when the whole compute job should stop. It lives in an authenticated tfring
store served by rank 0 of the compute job (``rendezvous.Store``); the address and the
secret travel in the ``TfDataServiceConfig`` file.

Keys: ``dispatcher/<i>`` (its target, ``grpc://host:port``), ``workers/<i>`` (a counter),
``shutdown``. Every wait takes a timeout and raises ``TimeoutError`` naming what did not
come. Thread-safety: one lock serializes the requests of a client.

When a compute job stops on an error (it gave up waiting for its dispatcher, say), whoever
served its registry writes why next to the config file, in ``<config file>.stopped``
(``record_stop``), before the registry goes; a training job that then cannot reach the
registry of that config file names the reason (``stop_note``). The next compute job with
the same config file removes it.
"""

import json
import os
import threading
import time

POLL_S = 0.1
SHUTDOWN_POLL_S = 5.0
CONNECT_TIMEOUT_S = 30.0
STOPPED_SUFFIX = ".stopped"


def _address_text(address):
    host, port = address
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


def record_stop(configfile, address, reason):
    """Writes ``<configfile>.stopped``: the compute job whose registry was at ``address``
    stopped because of ``reason`` (text). Never raises: a note, not the job's result."""
    try:
        with open(configfile + STOPPED_SUFFIX, "w") as f:
            json.dump({"registry": _address_text(address), "reason": str(reason),
                       "stopped_at": time.strftime("%Y-%m-%d %H:%M:%S %Z")}, f)
    except OSError:
        pass


def clear_stop(configfile):
    """Removes an earlier compute job's ``<configfile>.stopped`` (a new job starts)."""
    try:
        os.remove(configfile + STOPPED_SUFFIX)
    except OSError:
        pass


def stop_note(configfile, address=None):
    """Why the compute job of ``configfile`` stopped, as one sentence, or None when it left
    no record (or, with ``address``, when the record is another registry's)."""
    if not configfile:
        return None
    try:
        with open(configfile + STOPPED_SUFFIX) as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    if address is not None and record.get("registry") != _address_text(address):
        return None
    return (f"the compute job whose registry was at {record.get('registry')} stopped at {record.get('stopped_at')}: "
            f"{record.get('reason')} (recorded in {configfile + STOPPED_SUFFIX})")


class ComputeClient:
    """A connection to the compute job's registry.

    Args:
      address: ``(host, port)`` of the registry store.
      key: the job secret (bytes or hex text).
      verbose: > 1 prints each registration.
      source: where the address came from (the config file's path), for errors.
      timeout: seconds to try to connect (and each request's allowance).

    Raises:
      tfring.errors.TfringError (TimeoutError, ConnectionError): the registry could not be
        reached; the message names the address, ``source``, and the compute job's recorded
        reason for stopping when ``source`` is a config file that has one (``stop_note``).
    """

    def __init__(self, address, key, verbose=1, source=None, timeout=CONNECT_TIMEOUT_S):
        from tfring import _core
        from tfring import _errors as errors

        host, port = address
        secret = key.decode() if isinstance(key, bytes) else key
        try:
            self._client = _core.StoreClient(host, int(port), secret, float(timeout))
        except errors.TfringError as e:
            raise type(e)(_unreachable(address, source, e)) from None
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
        from tfring import _errors as errors

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
        from tfring import _errors as errors

        while True:
            try:
                with self._lock:
                    self._client.get("shutdown", SHUTDOWN_POLL_S)
                return
            except errors.TimeoutError:
                continue
            except errors.TfringError:  # the store's rank stopped: nothing left to serve
                return


def _unreachable(address, source, error):
    """The message for a registry that could not be reached: what was tried, and why the
    compute job stopped when it recorded that."""
    where = f"the config file {source}" if source else "the TfDataServiceConfig (no file)"
    detail = str(error)
    if detail.startswith("cannot reach the tfring store (") and "): " in detail:
        detail = detail.split("): ", 1)[1]  # the core names TFRING_STORE_ADDR, which is not what was used
    message = f"cannot reach the tf.data compute job's registry at {_address_text(address)} (from {where}): {detail}"
    note = stop_note(source, address)
    if note is not None:
        return f"{message}. {note[0].upper()}{note[1:]}"
    if source and not os.path.exists(source):
        return f"{message}. The compute job that wrote {source} has stopped (it removes the file when it stops)"
    return f"{message}. Is the compute job that wrote it still running (a compute job that was killed leaves it behind)?"
