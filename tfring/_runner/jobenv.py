"""The environment of each worker: the launcher's own environment, the job's settings, the
rank's identity from the slot plan, the store address and the job secret.

The secret travels only here (the environment of the worker processes): never in argv,
and ``describe`` hides it in anything the launcher prints. The names a worker's lower
layers read too (secret, store address) live in ``tfring._bootstrap.launch_env``.
"""

from tfring._bootstrap.launch_env import SECRET, new_secret, split_store_address, store_address

__all__ = ["SECRET", "describe", "horovod_identity", "new_secret", "split_store_address",
           "store_address", "worker_env"]


def worker_env(base, slot, settings, store_addr, secret):
    """The full environment of the worker of ``slot``.

    Args:
      base: the launcher's environment (mapping).
      slot: the rank's ``hosts.Slot``.
      settings: {variable: (value, origin)} from ``settings.collect``.
      store_addr: ``host:port`` of the job's store.
      secret: the job secret.
    """
    env = dict(base)
    env.update({name: value for name, (value, _) in settings.items()})
    env.update(slot.env())
    env.update(horovod_identity(slot.env()))
    env["TFRING_STORE_ADDR"] = store_addr
    env[SECRET] = secret
    env.setdefault("PYTHONUNBUFFERED", "1")  # lines reach the launcher as they are printed
    return env


def horovod_identity(tfring_identity):
    """The HOROVOD_RANK ... HOROVOD_CROSS_SIZE variables horovodrun sets, for the scripts
    that read them (``int(os.environ["HOROVOD_RANK"])``), from the TFRING_* identity."""
    return {"HOROVOD_" + name[len("TFRING_"):]: value for name, value in tfring_identity.items()}


def describe(settings):
    """One line listing the job's settings and where each came from (no secret)."""
    if not settings:
        return "settings: core defaults"
    return "settings: " + ", ".join(f"{name}={'<hidden>' if name == SECRET else value} ({origin})"
                                    for name, (value, origin) in sorted(settings.items()))
