"""The compute job of the tf.data service (``horovod.tensorflow.data.compute_worker``):

    tfringrun -np 2 python -m tfring.tensorflow.data.compute_worker /shared/compute.json \\
        [--dispatchers 1] [--dispatcher-side compute|training] [--timeout 60]

Rank 0 serves the registry (an authenticated tfring store on every interface), writes the
``TfDataServiceConfig`` file for the training job (owner-only; it holds the secret), and
hands the same config to the other compute ranks through the launcher's store (no stale
file from an earlier run can be read). Every rank then runs ``compute_worker_fn`` until the
training side calls ``config.compute_client().shutdown()``. Rank 0 removes the file when
it stops; when it stops on an error (it gave up waiting for a dispatcher, say), it first
writes why to ``<config file>.stopped``, which the training side's errors then name. The
ranks need no collectives: ``tfring.init()`` is not called. On Spark executors:
``python -m tfring.spark.compute_worker`` (``horovod.spark.tensorflow.compute_worker``).
"""

import argparse
import contextlib
import json
import os
import sys

from tfring._tensorflow.data.compute_rank import rank_and_size, this_host

CONFIG_KEY = "tfring.compute/config"






def _launcher_store():
    """A client of the launcher's store, or None when not started by a launcher."""
    if "TFRING_STORE_ADDR" not in os.environ:
        return None
    from tfring import _core
    from tfring._bootstrap import launch_env

    host, port = launch_env.split_store_address(os.environ[launch_env.STORE_ADDR])
    return _core.StoreClient(host, port, os.environ[launch_env.SECRET], 30.0)


@contextlib.contextmanager
def serve_registry(configfile, dispatchers, workers, dispatcher_side, timeout, advertise):
    """Serves the compute job's registry (an authenticated store on every interface,
    advertised as ``advertise``) and writes its ``TfDataServiceConfig`` to ``configfile``
    for the duration of the ``with`` body, which gets the config. On the way out: when the
    body raised, records why next to the file (``compute_client.record_stop``); then stops
    the registry and removes the file. Compute rank 0 under tfringrun and the Spark driver
    of ``tfring._engines.spark.compute_worker`` both use it."""
    from tfring._bootstrap import launch_env
    from tfring._bootstrap.store import Store
    from tfring._tensorflow.data.compute_client import clear_stop, record_stop
    from tfring._tensorflow.data.compute_service import TfDataServiceConfig

    registry = Store(host="0.0.0.0", advertise=advertise)
    address = launch_env.split_store_address(registry.address)
    try:
        config = TfDataServiceConfig(dispatchers=dispatchers, workers_per_dispatcher=workers // dispatchers,
                                     dispatcher_side=dispatcher_side, addresses={"store": [address]},
                                     key=registry.secret.encode(), timeout=timeout, source=configfile)
        clear_stop(configfile)
        config.write(configfile)
        yield config
    except BaseException as e:
        first = str(e).strip().splitlines()
        record_stop(configfile, address, f"{type(e).__name__}: {first[0]}" if first else type(e).__name__)
        raise
    finally:
        registry.stop()
        if os.path.exists(configfile):
            os.remove(configfile)


def main(dispatchers, dispatcher_side, configfile, timeout):
    from tfring._tensorflow.data.compute_service import TfDataServiceConfig, compute_worker_fn

    rank, size = rank_and_size()
    if size % dispatchers:
        raise ValueError(f"the compute job's {size} ranks must be a multiple of --dispatchers {dispatchers}")
    launcher = _launcher_store()
    if rank == 0:
        with serve_registry(configfile, dispatchers, size, dispatcher_side, timeout, this_host()) as config:
            if launcher is not None:
                launcher.set(CONFIG_KEY, json.dumps(config.to_dict()).encode())
            print(f"tfring compute service: {size} worker(s), {dispatchers} dispatcher(s) on the {dispatcher_side} "
                  f"side; config in {configfile}", flush=True)
            compute_worker_fn(config, timeout)
        return
    if launcher is not None:
        config = TfDataServiceConfig.from_dict(json.loads(launcher.get(CONFIG_KEY, float(timeout))))
    else:
        config = TfDataServiceConfig.read(configfile, wait_for_file_creation=True, timeout=timeout)
    compute_worker_fn(config, timeout)


def parse(argv):
    p = argparse.ArgumentParser(prog="python -m tfring.tensorflow.data.compute_worker",
                                description="The compute job of the tf.data service (run it under tfringrun).")
    p.add_argument("configfile", help="where rank 0 writes the TfDataServiceConfig for the training job")
    p.add_argument("--dispatchers", type=int, default=1, help="number of dispatchers (default 1)")
    p.add_argument("--dispatcher-side", choices=("compute", "training"), default="compute",
                   help="where the dispatchers run (default: compute)")
    p.add_argument("--timeout", type=int, default=60, help="seconds every registration may take (default 60)")
    ns = p.parse_args(argv)
    if ns.dispatchers < 1:
        p.error(f"--dispatchers must be >= 1. Received: {ns.dispatchers}")
    return ns


def command_line(argv=None):
    """``python -m tfring.tensorflow.data.compute_worker CONFIG ...``: parses ``argv`` (default
    ``sys.argv[1:]``) and runs ``main`` until the training side stops the compute job."""
    args = parse(sys.argv[1:] if argv is None else argv)
    main(args.dispatchers, args.dispatcher_side, args.configfile, args.timeout)


if __name__ == "__main__":
    command_line()
