"""The remote end of a worker started over ssh: ``python -m tfring._runner.remote_boot``.

tfringrun runs this module on the remote host (``ssh HOST 'cd DIR; exec PYTHON -m
tfring._runner.remote_boot'``) and speaks to it only through its stdin, so nothing secret
ever appears in a command line on either host (``ps`` shows them to every user):

1. The first line is a JSON object (``encode_payload``): ``command`` (argv list),
   ``env`` (variables to set, the job secret included), ``cwd``, ``grace_period_s``,
   ``network_interface`` (or null) and ``rank``. It must arrive within
   ``PAYLOAD_TIMEOUT_S``.
2. Every later line ``signal N`` sends signal N to the worker's process group: this is
   how tfringrun's SIGINT/SIGTERM reach remote workers without a terminal (``ssh -tt``).
3. End of input means tfringrun (or its ssh client, or the connection) is gone: the
   worker's process group gets SIGKILL at once, as local workers do through
   ``PR_SET_PDEATHSIG`` when tfringrun dies.

The worker runs in its own session with stdin ``/dev/null`` and this process's stdout and
stderr (the ssh channel); it dies with this process (``PR_SET_PDEATHSIG``). SIGINT,
SIGTERM and SIGHUP sent to this process are passed on to the worker's group. When the
worker exits, whatever it left in its process group gets SIGTERM, then SIGKILL after the
grace period; then this process exits with the worker's code, or 128+N when signal N
killed it (tfringrun's ``RemoteProcess`` turns that back into "killed by signal N").

With ``network_interface`` set (``tfringrun --network-interface IFACE``) and no explicit
``TFRING_BIND_ADDR``, the worker binds and advertises that interface's address on this
host. Exit codes of its own: 2 (no or bad payload, unknown interface), 127/126 (the
command cannot be started).
"""

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time

PAYLOAD_TIMEOUT_S = 30.0
MAX_PAYLOAD = 16 << 20
TICK_S = 0.05
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def encode_payload(command, env, cwd, grace_period_s, network_interface, rank):
    """The first line tfringrun writes to the bootstrap's stdin (bytes, newline-terminated)."""
    return (json.dumps({"command": list(command), "env": dict(env), "cwd": cwd,
                        "grace_period_s": grace_period_s, "network_interface": network_interface,
                        "rank": rank}) + "\n").encode()


class _Lines:
    """Lines from a file descriptor, with a timeout; no buffering surprises from ``sys.stdin``."""

    def __init__(self, fd):
        self._fd = fd
        self._buf = b""
        self.eof = False

    def readline(self, timeout=None):
        """The next line without its newline; None at end of input (or on timeout)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buf and not self.eof:
            if len(self._buf) > MAX_PAYLOAD:
                raise ValueError("input line too long")
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self._fd], [], [], wait)
            if not ready:
                return None
            chunk = os.read(self._fd, 65536)
            if not chunk:
                self.eof = True
            self._buf += chunk
        if b"\n" not in self._buf:
            return None
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode("utf-8", errors="replace")


def _say(text):
    sys.stderr.write(f"tfring remote_boot on {socket.gethostname()}: {text}\n")
    sys.stderr.flush()


def _killpg(pgid, signum):
    try:
        os.killpg(pgid, signum)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _watch_launcher(lines, pgid):
    """Runs in a thread: ``signal N`` lines go to the worker's group; end of input kills it."""
    while True:
        try:
            line = lines.readline()
        except (OSError, ValueError):
            line = None
        if line is None:
            _killpg(pgid, signal.SIGKILL)
            return
        word, _, number = line.strip().partition(" ")
        if word == "signal" and number.isdigit():
            _killpg(pgid, int(number))


def _reap_group(pgid, grace_period_s):
    """SIGTERM to what the worker left in its group, SIGKILL after the grace period."""
    if not _killpg(pgid, signal.SIGTERM):
        return
    deadline = time.monotonic() + grace_period_s
    while time.monotonic() < deadline and _killpg(pgid, 0):
        time.sleep(TICK_S)
    _killpg(pgid, signal.SIGKILL)


def _worker_env(payload):
    env = dict(os.environ)
    env.update({str(k): str(v) for k, v in payload.get("env", {}).items()})
    interface = payload.get("network_interface")
    if interface and not payload.get("env", {}).get("TFRING_BIND_ADDR"):
        from tfring._runner import network

        env["TFRING_BIND_ADDR"] = network.interface_address(interface)
    return env


def run(fd=0):
    """Reads the payload from ``fd``, runs the worker, returns the exit code."""
    lines = _Lines(fd)
    try:
        line = lines.readline(PAYLOAD_TIMEOUT_S)
        if line is None:
            _say(f"no job description on stdin within {PAYLOAD_TIMEOUT_S:g} s; this module is "
                 "started by tfringrun, not by hand")
            return 2
        payload = json.loads(line)
        command = [str(word) for word in payload["command"]]
        env = _worker_env(payload)
    except (ValueError, KeyError, TypeError) as e:
        _say(f"bad job description: {e}")
        return 2
    cwd = payload.get("cwd")
    if cwd and not os.path.isdir(cwd):
        _say(f"directory {cwd} does not exist here; the worker starts in {os.getcwd()}")
        cwd = None
    from tfring._runner.spawn import worker_preexec

    try:
        proc = subprocess.Popen(command, env=env, cwd=cwd, stdin=subprocess.DEVNULL, close_fds=True,
                                start_new_session=True,
                                preexec_fn=worker_preexec(env))  # noqa: PLW1509 - no locks taken
    except OSError as e:
        _say(f"rank {payload.get('rank')} cannot start {command[0]!r}: {e.strerror or e}")
        return 127 if isinstance(e, FileNotFoundError) else 126
    for s in FORWARDED:
        signal.signal(s, lambda signum, frame: _killpg(proc.pid, signum))
    threading.Thread(target=_watch_launcher, args=(lines, proc.pid), daemon=True,
                     name="remote-boot-stdin").start()
    code = proc.wait()
    _reap_group(proc.pid, float(payload.get("grace_period_s", 5.0)))
    return 128 - code if code < 0 else code


def main():
    sys.exit(run())


if __name__ == "__main__":
    main()
