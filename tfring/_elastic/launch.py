"""``tfringrun`` for an elastic job: builds the driver (driver.py) from the command
line, serves the store, and runs it. tfringrun (tfring/_runner/launch.py) calls
``launch_elastic`` when any elastic flag is given, through the provider ``elastic_launch``
(tfring/_bootstrap/providers.py): the elastic package is the layer above the launcher.

Each worker gets TFRING_STORE_ADDR, TFRING_SECRET, the job's settings and
TFRING_ELASTIC_WORKER (its id) and TFRING_ELASTIC_HOST (its host); its rank comes from the store at ``init()``, so no
TFRING_RANK... or HOROVOD_RANK... variables are set, and workers are not bound to CPUs
(ranks move between generations).
"""

import os

from tfring import _core
from tfring._elastic import protocol
from tfring._elastic.driver import ElasticJob, ElasticSettings, OutputTails
from tfring._runner import discovery as discovery_lib
from tfring._runner import hosts as hosts_lib
from tfring._runner import jobenv, network, remote, spawn
from tfring._runner import settings as settings_lib
from tfring._runner import store_hook as store_hook_lib
from tfring._runner.output import Output
from tfring._runner.signals import SignalRelay

TIMEOUT_MARGIN_S = 30.0  # workers wait this much longer than the driver for a generation
# A generation's rendezvous, unless TFRING_START_TIMEOUT_S is set: a member that died during
# it costs at most this much before the others join the next generation.
RENDEZVOUS_TIMEOUT_S = 30.0


def _discovery(ns, report):
    if ns.host_discovery_script is not None:
        script = os.path.abspath(ns.host_discovery_script)
        if not os.access(script, os.X_OK):
            raise ValueError(f"--host-discovery-script {ns.host_discovery_script}: not an executable file")
        return discovery_lib.ScriptDiscovery(script, ns.slots, report)
    if ns.hosts is not None:
        return discovery_lib.FixedDiscovery(hosts_lib.parse_hosts(ns.hosts))
    if ns.hostfile is not None:
        return discovery_lib.FixedDiscovery(hosts_lib.parse_hostfile(ns.hostfile))
    slots = ns.max_np or ns.num_proc
    if slots is None:
        raise ValueError("an elastic job needs hosts: --host-discovery-script, -H / --hostfile, or -np / "
                         "--max-np for this machine")
    return discovery_lib.FixedDiscovery([hosts_lib.Host("localhost", slots)])


def _worker_env(base, job_settings, store, wid, host, timeout_s):
    env = {k: v for k, v in base.items()
           if k not in settings_lib.IDENTITY and not k.startswith("HOROVOD_")}
    env["TFRING_START_TIMEOUT_S"] = f"{RENDEZVOUS_TIMEOUT_S:g}"  # unless the job sets it (next line)
    env.update({name: value for name, (value, _) in job_settings.items()})
    env.update(store.env())
    env[protocol.WORKER_ENV] = wid
    env[protocol.HOST_ENV] = host
    env["TFRING_ELASTIC_TIMEOUT_S"] = f"{timeout_s:g}"
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


class _Starter:
    """Starts a worker on a host: here, or over ssh / ``--remote-command`` elsewhere."""

    def __init__(self, ns, job_settings, store, timeout_s):
        self.ns, self.job_settings, self.store, self.timeout_s = ns, job_settings, store, timeout_s
        self._local = spawn.LocalSpawner()
        self._remote = {}

    def __call__(self, wid, host):
        if not hosts_lib.is_local(host) and self.store.address.startswith(("127.", "[::1]")):
            raise OSError(f"host {host} is not this machine, but the job's store and workers listen on "
                          f"{self.store.address}, which {host} cannot reach: start tfringrun with "
                          "--network-interface IFACE (or list a remote host from the first discovery)")
        if hosts_lib.is_local(host):
            env = _worker_env(os.environ, self.job_settings, self.store, wid, host, self.timeout_s)
            return self._local.spawn(self.ns.command, env)
        spawner = self._remote.get(host)
        if spawner is None:
            words = remote.template_words(self.ns.remote_command, self.ns.ssh_port, self.ns.ssh_identity_file,
                                          os.environ)
            spawner = self._remote[host] = remote.RemoteSpawner(
                host, words, self.ns.grace_period_s, self.ns.network_interface,
                local_hook=spawn.die_with_launcher_hook())
        env = _worker_env(remote.remote_base_env(os.environ), self.job_settings, self.store, wid, host,
                          self.timeout_s)
        return spawner.spawn(self.ns.command, env)


def _store_bind(ns, first_hosts):
    if ns.network_interface:
        return network.interface_address(ns.network_interface)
    if ns.bind_addr:
        return ns.bind_addr
    remote_hosts = [h.name for h in first_hosts if not hosts_lib.is_local(h.name)]
    return network.reachable_address(remote_hosts) if remote_hosts else "127.0.0.1"


def launch_elastic(ns, error, store_hook=None):
    """Runs the elastic job of the parsed command line ``ns``; returns the exit code.
    ``error(text)`` reports a usage error and returns its exit code. ``store_hook`` as in
    ``launch.launch_job``: entered once the store serves, exited after the job, before the
    store stops."""
    try:
        tails = OutputTails()  # shown when the script fails before init() on every worker
        output = Output(log_dir=ns.output_filename, observer=tails.observe)
        found = _discovery(ns, output.message)
        job_settings = settings_lib.collect(ns, os.environ)
        settings_lib.validate(job_settings, {})
        first_hosts = found.hosts()
        bind = _store_bind(ns, first_hosts)
    except ValueError as e:
        return error(str(e))
    cfg = ElasticSettings(min_np=ns.min_np, max_np=ns.max_np, initial_np=ns.num_proc, reset_limit=ns.reset_limit,
                          elastic_timeout_s=ns.elastic_timeout, discovery_interval_s=ns.discovery_interval_s,
                          grace_period_s=ns.grace_period_s,
                          stopped_limit_s=settings_lib.float_value(job_settings, "TFRING_PEER_TIMEOUT_S"),
                          ready_timeout_s=settings_lib.float_value(job_settings, "TFRING_START_TIMEOUT_S"))
    blacklist = discovery_lib.Blacklist(tuple(ns.blacklist_cooldown_range) if ns.blacklist_cooldown_range else None)
    with SignalRelay() as relay:
        try:
            with store_hook_lib.serving(bind, store_hook, output, ns.verbose) as store:
                client = _core.StoreClient(*jobenv.split_store_address(store.address), store.secret, 30.0)
                starter = _Starter(ns, job_settings, store, ns.elastic_timeout + TIMEOUT_MARGIN_S)
                job = ElasticJob(output, client, found, blacklist, starter, cfg, verbose=ns.verbose, tails=tails)
                output.message(f"elastic job: --min-np {cfg.min_np}, --max-np {cfg.max_np or 'unlimited'}, "
                               f"{found.describe()}")
                code = job.run(relay)
        except store_hook_lib.StoreBindError as e:
            return error(str(e))
    return code
