"""Where each host's workers start, where the job's store listens, and the environment each
worker gets for that.

- Hosts that are this machine (``hosts.is_local``) get a ``LocalSpawner``; every other
  host a ``RemoteSpawner`` (ssh, or ``--remote-command`` / ``TFRING_REMOTE_COMMAND``).
- The store listens on (first match):
  ``--network-interface IFACE``: that interface's address here; every worker then binds
  and advertises IFACE's address on its own host (``TFRING_BIND_ADDR``; remote bootstraps
  look it up there);
  ``--bind-addr ADDR``: ADDR (single-host jobs only, as before);
  remote hosts: the address this machine uses to reach the first of them
  (``network.reachable_address``), so that workers here advertise an address the other
  hosts can reach too;
  otherwise ``127.0.0.1``.
- In a multi-host job one ``TFRING_BIND_ADDR`` for every worker cannot be right (it names
  one host's address), so ``--bind-addr`` / ``TFRING_BIND_ADDR`` are refused there:
  ``--network-interface`` is the multi-host way.

``place`` does all checks before anything starts; errors are ``ValueError`` (exit 2).
"""

import dataclasses
import os

from tfring._runner import hosts as hosts_lib
from tfring._runner import jobenv, network, remote, spawn


@dataclasses.dataclass
class Placement:
    spawners: dict  # host name -> LocalSpawner | RemoteSpawner
    store_bind: str  # address the store listens on
    remote_hosts: list  # names of the hosts that are not this machine, in plan order
    local_bind_addr: str = None  # TFRING_BIND_ADDR of this machine's workers (--network-interface)

    def is_remote(self, slot):
        return isinstance(self.spawners[slot.host], remote.RemoteSpawner)

    def worker_env(self, environ, slot, settings, store_addr, secret):
        """The environment of ``slot``'s worker: ``jobenv.worker_env`` for local workers
        (plus the interface address), ``remote.worker_env`` for remote ones."""
        if self.is_remote(slot):
            return remote.worker_env(environ, slot, settings, store_addr, secret)
        env = jobenv.worker_env(environ, slot, settings, store_addr, secret)
        if self.local_bind_addr:
            env["TFRING_BIND_ADDR"] = self.local_bind_addr
        return env


def _hosts_in_order(slots):
    seen = []
    for s in slots:
        if s.host not in seen:
            seen.append(s.host)
    return seen


def place(slots, ns, settings, environ=None):
    """Plans spawners and the store address for ``slots`` (``hosts.plan``).

    Args:
      slots: the slot plan.
      ns: the parsed command line (``network_interface``, ``bind_addr``, ``remote_command``,
        ``ssh_port``, ``ssh_identity_file``, ``grace_period_s``).
      settings: ``settings.collect`` output ({variable: (value, origin)}).
      environ: tfringrun's environment (default ``os.environ``), for TFRING_REMOTE_COMMAND.

    Raises:
      ValueError: unknown interface, a bind address in a multi-host job, a bad remote
        command template, or no address the remote hosts can reach.
    """
    environ = os.environ if environ is None else environ
    names = _hosts_in_order(slots)
    remote_hosts = [h for h in names if not hosts_lib.is_local(h)]
    interface = ns.network_interface
    bind = settings.get("TFRING_BIND_ADDR")
    if interface and bind:
        raise ValueError(f"--network-interface {interface} and {bind[1]} both say where workers "
                         "listen; give only one")
    if remote_hosts and bind:
        raise ValueError(f"{bind[1]} names one address, which cannot be every host's: in a job on "
                         f"several hosts ({', '.join(names)}) name the interface with "
                         "--network-interface IFACE instead")
    words = None
    if remote_hosts or ns.remote_command is not None:
        words = remote.template_words(ns.remote_command, ns.ssh_port, ns.ssh_identity_file, environ)
    local_bind = None
    if interface:
        store_bind = local_bind = network.interface_address(interface)
    elif ns.bind_addr:
        store_bind = ns.bind_addr
    elif remote_hosts:
        store_bind = network.reachable_address(remote_hosts)
    else:
        store_bind = "127.0.0.1"
    spawners = {}
    local = None
    for name in names:
        if name in remote_hosts:
            spawners[name] = remote.RemoteSpawner(name, words, ns.grace_period_s, interface,
                                                  local_hook=spawn.die_with_launcher_hook())
        else:
            local = local or spawn.LocalSpawner()
            spawners[name] = local
    return Placement(spawners, store_bind, remote_hosts, local_bind)
