"""Starting workers on other hosts: over ssh, or through any command that runs a shell
command line "on" a host (``--remote-command``), e.g. ``ip netns exec {host} sh -c
{command}`` in tests.

For each remote worker tfringrun runs, on this machine, the remote command with ``{host}``
replaced by the host's name and the word ``{command}`` by one shell command line::

    cd DIR 2>/dev/null; exec PYTHON -m tfring._runner.remote_boot

(``DIR`` is tfringrun's working directory, ``PYTHON`` its interpreter: the remote hosts
need the same paths, as with Horovod or mpirun). Everything else, the worker's command,
its environment and the job secret, goes to that bootstrap through the remote command's
stdin (see remote_boot.py), so no command line on either host shows the secret.

The default remote command is ``ssh -o BatchMode=yes ... [-p PORT] [-i FILE] {host}
{command}``; ``--remote-command TEMPLATE`` (or ``TFRING_REMOTE_COMMAND``) replaces it and
``--ssh-port`` / ``--ssh-identity-file`` then do not apply.

Contract of ``RemoteProcess`` (what the supervisor sees, like a local ``Popen``): ``pid``
is the local remote-command process (its own session), ``stdout``/``stderr`` carry the
worker's streams, ``wait()`` returns the worker's exit code (negative N when signal N
killed it), and ``signal_group(signum)`` asks the bootstrap to signal the worker's process
group. SIGKILL also closes the channel and, if the local process is still there 2 s later,
kills it: a lost connection makes the bootstrap kill the worker (no orphans).
"""

import os
import shlex
import signal
import subprocess
import sys
import threading

from tfring._runner import jobenv, remote_boot

SSH = ("ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=10",
       "-o", "ServerAliveCountMax=3")
TEMPLATE_ENV = "TFRING_REMOTE_COMMAND"
KILL_LOCAL_AFTER_S = 2.0

# Variables that describe this machine or this login and must not follow the job to
# another host.
_NOT_EXPORTED = {"HOSTNAME", "HOST", "PWD", "OLDPWD", "SHLVL", "_", "DISPLAY", "TERM", "TMUX",
                 "XAUTHORITY", "XDG_RUNTIME_DIR", "XDG_SESSION_ID", "DBUS_SESSION_BUS_ADDRESS",
                 "SSH_AUTH_SOCK", "SSH_AGENT_PID", "SSH_CLIENT", "SSH_CONNECTION", "SSH_TTY"}


def remote_base_env(environ):
    """The part of tfringrun's environment that remote workers get (all of it except
    variables tied to this machine or login, and shell functions)."""
    return {k: v for k, v in environ.items()
            if k not in _NOT_EXPORTED and not k.startswith("BASH_FUNC_")}


def template_words(remote_command=None, ssh_port=None, ssh_identity_file=None, environ=None):
    """The remote command template as argv words.

    Args:
      remote_command: ``--remote-command`` text, or None for ``TFRING_REMOTE_COMMAND`` from
        ``environ`` or else ssh.
      ssh_port, ssh_identity_file: options of the built-in ssh command.

    Raises:
      ValueError: the template lacks the word ``{command}``, cannot be split, or ssh
        options were given together with a custom template.
    """
    environ = os.environ if environ is None else environ
    text = remote_command if remote_command is not None else environ.get(TEMPLATE_ENV) or None
    if text is None:
        words = list(SSH)
        if ssh_port is not None:
            words += ["-p", str(ssh_port)]
        if ssh_identity_file is not None:
            words += ["-i", ssh_identity_file]
        return words + ["{host}", "{command}"]
    origin = "--remote-command" if remote_command is not None else TEMPLATE_ENV
    if ssh_port is not None or ssh_identity_file is not None:
        raise ValueError(f"--ssh-port and --ssh-identity-file apply to the built-in ssh command only, "
                         f"not to {origin}; put the options into the template")
    try:
        words = shlex.split(text)
    except ValueError as e:
        raise ValueError(f"{origin}: cannot split {text!r}: {e}") from None
    if "{command}" not in words:
        raise ValueError(f"{origin} must contain the word {{command}} (the remote shell command "
                         f"line), e.g. 'ssh {{host}} {{command}}'. Received: {text!r}")
    return words


def _bootstrap_line(python, cwd):
    return (f"cd {shlex.quote(cwd)} 2>/dev/null; "
            f"exec {shlex.quote(python)} -m tfring._runner.remote_boot")


class RemoteProcess:
    """One remote worker as seen from tfringrun (see the module docstring)."""

    def __init__(self, popen):
        self._popen = popen
        self._lock = threading.Lock()
        self.pid = popen.pid
        self.stdout = popen.stdout
        self.stderr = popen.stderr

    def send_payload(self, data):
        """Writes the job description; False when the remote command is already gone."""
        return self._write(data)

    def _write(self, data):
        with self._lock:
            try:
                self._popen.stdin.write(data)
                self._popen.stdin.flush()
                return True
            except (OSError, ValueError):  # the remote end is gone, or we closed the pipe
                return False

    def _close_stdin(self):
        with self._lock:
            try:
                self._popen.stdin.close()
            except OSError:
                pass

    def poll(self):
        return _from_shell_status(self._popen.poll())

    def wait(self, timeout=None):
        return _from_shell_status(self._popen.wait(timeout))

    @property
    def returncode(self):
        return self.poll()

    def signal_group(self, signum):
        """Passes ``signum`` to the remote worker's process group. Returns False when the
        worker is already gone."""
        if self._popen.poll() is not None:
            return False
        sent = self._write(f"signal {int(signum)}\n".encode())
        if signum == signal.SIGKILL:
            self._close_stdin()
            timer = threading.Timer(KILL_LOCAL_AFTER_S, self._kill_local)
            timer.daemon = True
            timer.start()
        return sent

    def _kill_local(self):
        if self._popen.poll() is None:
            try:
                os.killpg(self._popen.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def close(self):
        """Ends the channel: a still running remote worker is killed by its bootstrap."""
        self._close_stdin()


def _from_shell_status(code):
    """The bootstrap reports death by signal N as 128+N; ssh itself fails with 255."""
    if code is not None and 128 < code < 128 + 65:
        return -(code - 128)
    return code


class RemoteSpawner:
    """Starts workers on one remote ``host`` through the remote command template.

    Args:
      host: the host's name, as given in -H / --hostfile.
      words: ``template_words()``.
      grace_period_s: what the bootstrap waits between SIGTERM and SIGKILL for leftovers.
      network_interface: interface whose address the remote workers bind (or None).
      local_hook: ``preexec_fn`` for the local remote-command process (dies with tfringrun).
      python, cwd: the interpreter and directory used on the remote host.
    """

    def __init__(self, host, words, grace_period_s, network_interface=None, local_hook=None,
                 python=None, cwd=None):
        self.host = host
        self.grace = grace_period_s
        self.network_interface = network_interface
        self._hook = local_hook
        self._cwd = cwd or os.getcwd()
        line = _bootstrap_line(python or sys.executable, self._cwd)
        self.argv = [line if w == "{command}" else w.replace("{host}", host) for w in words]

    def spawn(self, command, env):
        """Starts the worker ``command`` with environment ``env`` on the host. Returns a
        ``RemoteProcess``.

        Raises:
          OSError: the remote command itself (e.g. ssh) cannot be started here.
        """
        try:
            popen = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, start_new_session=True, close_fds=True,
                                     preexec_fn=self._hook)  # noqa: PLW1509 - the hook takes no locks
        except OSError as e:  # name the remote command, not the worker's, in the launcher's message
            raise type(e)(e.errno, f"{e.strerror} (the remote command {self.argv[0]!r} for host "
                                   f"{self.host})") from None
        proc = RemoteProcess(popen)
        proc.send_payload(remote_boot.encode_payload(command, env, self._cwd, self.grace,
                                                     self.network_interface, env.get("TFRING_RANK")))
        return proc

    def describe(self):
        """The local command line (no secret in it), for --verbose."""
        return " ".join(shlex.quote(w) for w in self.argv)


def worker_env(environ, slot, settings, store_addr, secret):
    """The environment sent to a remote worker (``jobenv.worker_env`` over the exportable
    part of ``environ``)."""
    return jobenv.worker_env(remote_base_env(environ), slot, settings, store_addr, secret)
