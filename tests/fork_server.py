"""A fork server for the test suite's rank processes: TensorFlow and Keras imported once,
each rank a fork of it.

Why: a rank process pays ~5-7 CPU-s to import TensorFlow and Keras, and the suite starts a
few hundred of them on a 2-core machine (lab/records/test_suite.md). A fork of a process
that has already imported them pays nothing for it.

How a rank starts (tests/helpers.py ``run_launcher``, for scripts that import TensorFlow):
the launcher starts ``python tests/fork_client.py SCRIPT ARGS...`` exactly where it would
start ``python SCRIPT ARGS...`` (or ``python -m MODULE ARGS...``; where a product API takes
one executable for its ranks, as ``tfring.run(executable=...)``, ``tests.helpers.rank_executable``
writes a shell script that runs the client). The client connects to this server's Unix socket and sends
its stdin/stdout/stderr (SCM_RIGHTS), argv, environment, working folder and CPU affinity;
the server forks a child that takes them over and runs SCRIPT as ``__main__``. The client
stays as the launcher's view of the rank: it forwards the signals it receives to the child,
stops itself when the child stops (a frozen rank looks frozen to the launcher) and exits as
the child exited (the same code, or killed by the same signal). When the client dies
(SIGKILL of the client or of its process group), the server SIGKILLs the child at once.

What differs from a fresh process, and so stays out of it (the caller's opt-out,
``run_launcher(..., fork=False)``): ``os.getppid()``, the rank's own process group, and
settings that TensorFlow reads only while it is imported (this server is started with the
suite's worker environment, ``tests.helpers.job_env``).

Contract: one server per pytest process (``tests.helpers.start_fork_server`` from a
session fixture), serving requests one at a time on its main thread (a fork takes ~10 ms);
per child, one thread reports its stops and its end, one kills it when its client leaves.

Run as ``python tests/fork_server.py SOCKET_PATH``; prints ``READY`` when it accepts.
"""

import json
import os
import select
import signal
import socket
import struct
import sys
import threading

PRELOAD = ("tensorflow", "keras", "numpy")
_HEADER = struct.Struct("!I")


def _receive_request(conn):
    """(request dict, [stdin, stdout, stderr fds]) from a client's first message."""
    msg, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
    while len(msg) < _HEADER.size or len(msg) < _HEADER.size + _HEADER.unpack_from(msg)[0]:
        more = conn.recv(1 << 20)
        if not more:
            raise ConnectionError("client closed mid-request")
        msg += more
    size = _HEADER.unpack_from(msg)[0]
    return json.loads(msg[_HEADER.size:_HEADER.size + size]), fds


def _send(conn, message):
    try:
        conn.sendall(json.dumps(message).encode() + b"\n")
    except OSError:
        pass  # the client is gone: nobody to tell


def _report(conn, pid):
    """Server thread: tells the client when child ``pid`` stops (SIGSTOP/SIGTSTP: the
    client then stops itself, so the launcher sees its rank stopped) and how it ended."""
    while True:
        _, status = os.waitpid(pid, os.WUNTRACED)
        if not os.WIFSTOPPED(status):
            break
        _send(conn, {"stopped": os.WSTOPSIG(status)})
    _send(conn, {"status": status})


def _kill_when_client_leaves(conn, pidfd):
    """Server thread: SIGKILLs the child when the client's end of the connection closes
    (the client was killed, or exited after its report). ``pidfd`` names the child even
    after it was reaped (then the signal is refused), so no other process can be hit."""
    try:
        while conn.recv(4096):
            pass
    except OSError:
        pass
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except OSError:
        pass  # it ended already
    _open_fds.discard(pidfd)
    _open_fds.discard(conn.fileno())
    os.close(pidfd)
    conn.close()


_open_fds = set()  # the server's connections and pidfds, which no child may keep


def _stdio(env):
    """sys.stdin/stdout/stderr over fds 0-2 as a fresh ``python`` would make them."""
    import io

    unbuffered = bool(env.get("PYTHONUNBUFFERED"))
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        mode = "rb" if fd == 0 else "wb"
        raw = io.FileIO(fd, mode, closefd=False)
        if fd == 0:
            stream = io.TextIOWrapper(io.BufferedReader(raw), encoding="utf-8", errors="strict")
        else:
            line = fd == 2 or raw.isatty()
            buffered = raw if unbuffered else io.BufferedWriter(raw)
            stream = io.TextIOWrapper(buffered, encoding="utf-8", errors="backslashreplace" if fd == 2 else "strict",
                                      line_buffering=line, write_through=unbuffered)
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _become_rank(conn, request, fds):
    """In the child: take over the client's stdio, environment, folder and CPUs; returns the
    script's path, or ``"-m"`` and a module's name (the caller runs it as ``__main__``)."""
    os.setsid()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if request.get("affinity"):
        os.sched_setaffinity(0, request["affinity"])
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    _stdio(request["env"])
    for fd in list(_open_fds) + [conn.fileno()]:
        try:
            os.close(fd)
        except OSError:
            pass
    if request["argv"][:1] == ["-m"]:  # python -m MODULE ARGS...: the folder on sys.path
        sys.argv = ["-m", *request["argv"][2:]]  # runpy puts the module's path in argv[0]
        sys.path[0] = os.getcwd()
        return "-m", request["argv"][1]
    script = request["argv"][0]
    sys.argv = list(request["argv"])
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    return script


def _exit_when_parent_leaves(parent_pidfd):
    """Blocks until the pytest process that started this server is gone (killed, or its run
    interrupted before the session fixture stopped the server), then exits: a server left
    behind holds ~500 MB and a CPU's worth of imports for nothing. Running children are
    killed by their clients' departure (_kill_when_client_leaves), not by this."""
    select.select([parent_pidfd], [], [])
    os._exit(0)


def serve(path):
    """Accepts clients until killed; returns (in a forked child only) the script to run."""
    for name in PRELOAD:
        __import__(name)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    parent = os.pidfd_open(os.getppid())
    _open_fds.add(parent)
    threading.Thread(target=_exit_when_parent_leaves, args=(parent,), daemon=True).start()
    print("READY", flush=True)
    while True:
        conn, _ = listener.accept()
        try:
            request, fds = _receive_request(conn)
        except (OSError, ValueError, ConnectionError):
            conn.close()
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            listener.close()
            return _become_rank(conn, request, fds)
        for fd in fds:
            os.close(fd)
        pidfd = os.pidfd_open(pid)  # before the child can be reaped: it names this child only
        _open_fds.update((conn.fileno(), pidfd))
        _send(conn, {"pid": pid})
        threading.Thread(target=_report, args=(conn, pid), daemon=True).start()
        threading.Thread(target=_kill_when_client_leaves, args=(conn, pidfd), daemon=True).start()


def _run_as_main(script):
    """Runs ``script`` as ``python script`` would (``("-m", module)``: as ``python -m
    module``): its traceback without this file's frames."""
    import runpy
    import traceback

    try:
        if isinstance(script, tuple):
            runpy.run_module(script[1], run_name="__main__", alter_sys=True)
            return
        runpy.run_path(script, run_name="__main__")
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as e:  # noqa: BLE001 - printed as the interpreter would, then exit 1
        tb = e.__traceback__
        while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) != os.path.abspath(script):
            tb = tb.tb_next
        traceback.print_exception(type(e), e, tb or e.__traceback__)
        sys.stderr.flush()
        raise SystemExit(1) from None


if __name__ == "__main__":
    _run_as_main(serve(sys.argv[1]))
