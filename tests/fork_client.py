"""Stands in for ``python SCRIPT ARGS...`` in a test's job: asks the fork server
(tests/fork_server.py, socket in ``TFRING_TEST_FORK_SERVER``) to run SCRIPT in a fork that
has TensorFlow and Keras imported already, forwards the signals this process gets to it,
stops when it stops (SIGCONT, forwarded, continues both) and exits as it exited. Imports
only the standard library (starts in ~20 ms).

  python tests/fork_client.py SCRIPT [ARGS...]
  python tests/fork_client.py -m MODULE [ARGS...]
"""

import json
import os
import signal
import socket
import struct
import sys

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
             signal.SIGCONT)


def _forwarder(child):
    """A signal handler that passes the signal on to ``child``. The child may have exited
    already (a launcher stopping a worker that is just finishing): its status is then on
    its way from the server, and the signal has nobody to reach."""

    def forward(sig, _frame):
        try:
            os.kill(child, sig)
        except ProcessLookupError:
            pass

    return forward


def main(argv):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(os.environ["TFRING_TEST_FORK_SERVER"])
    request = json.dumps({"argv": argv, "env": dict(os.environ), "cwd": os.getcwd(),
                          "affinity": sorted(os.sched_getaffinity(0))}).encode()
    socket.send_fds(sock, [struct.pack("!I", len(request)) + request], [0, 1, 2])
    replies = sock.makefile("rb")
    child = json.loads(replies.readline())["pid"]
    for sig in FORWARDED:
        signal.signal(sig, _forwarder(child))
    while True:
        line = replies.readline()
        if not line:
            os._exit(1)  # the server died before the child's end was reported
        report = json.loads(line)
        if "status" in report:
            break
        os.kill(os.getpid(), signal.SIGSTOP)  # the child stopped: so does its stand-in
    status = report["status"]
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # the only two that cannot be caught
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


if __name__ == "__main__":
    main(sys.argv[1:])
