"""The environment of each worker: the launcher's own environment, the job's settings, the
rank's identity from the slot plan, the store address and the job secret.

The secret travels only here (the environment of the worker processes): never in argv,
and ``describe`` hides it in anything the launcher prints.
"""

import secrets

SECRET = "TFRING_SECRET"


def new_secret():
    """A fresh per-job secret: 32 random bytes, hex-encoded."""
    return secrets.token_hex(32)


def store_address(bind_host, port):
    """The address workers on this machine use to reach a store bound to ``bind_host``."""
    host = bind_host
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host in ("::", "[::]"):
        host = "::1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{host}:{port}"


def split_store_address(address):
    """``(host, port)`` of a ``host:port`` store address (IPv6 brackets removed): the
    inverse of ``store_address``."""
    host, _, port = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


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
