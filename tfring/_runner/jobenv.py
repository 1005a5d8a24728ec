"""The environment of each worker: the launcher's own environment, the job's settings, the
rank's identity from the slot plan, the store address and the job secret.

The secret travels only here (the environment of the worker processes): never in argv,
and ``describe`` hides it in anything the launcher prints. The names a worker's lower
layers read too (secret, store address) live in ``tfring._bootstrap.launch_env``.
"""

from tfring._bootstrap.launch_env import SECRET, new_secret, split_store_address, store_address

__all__ = ["SECRET", "describe", "horovod_identity", "malloc_huge_pages", "new_secret", "split_store_address",
           "store_address", "worker_env"]

# glibc's transparent huge pages for malloc (glibc >= 2.35; older ones and other C libraries
# ignore the variable). docs/launcher.md, "Memory": a peer's single-copy read of a buffer on
# 4 KiB pages pins 4,096 pages per 16 MiB, and TensorFlow's tensors come from malloc.
HUGE_PAGES_TUNABLE = "glibc.malloc.hugetlb"


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
    env["GLIBC_TUNABLES"] = malloc_huge_pages(env.get("GLIBC_TUNABLES", ""))
    return env


def malloc_huge_pages(tunables):
    """``tunables`` (a GLIBC_TUNABLES value, ``name=value:name=value``) with
    glibc.malloc.hugetlb=1 added, unless it sets glibc.malloc.hugetlb already (the user's
    value wins: ``GLIBC_TUNABLES=glibc.malloc.hugetlb=0`` turns it off)."""
    items = [item for item in tunables.split(":") if item]
    if any(item.split("=", 1)[0] == HUGE_PAGES_TUNABLE for item in items):
        return tunables
    return ":".join(items + [HUGE_PAGES_TUNABLE + "=1"])


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
