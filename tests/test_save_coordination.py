"""Which rank writes a coordinated save (tfring/_saving/coordination.py), without TensorFlow:
two real ranks under tfringrun, the saves made through ``coordinated_save`` and
``atomic_write_directory`` as the Keras/TF hooks make them."""

import os

from tests.helpers import run_job

SAVES = r"""
import os, sys, time
import tfring
from tfring.saving import atomic_write_directory
from tfring._saving import coordination

tfring.init()
rank, out = tfring.rank(), sys.argv[1]


def save(name, slow_s=0.0):
    path = os.path.join(out, name)
    with coordination.coordinated_save(path, "test save") as role:
        if role in (coordination.WRITER, coordination.OWN):
            def write(tmp):
                os.makedirs(tmp)
                time.sleep(slow_s)
                with open(os.path.join(tmp, "weights"), "w") as f:
                    f.write(f"rank {rank}")
            atomic_write_directory(path, write)
        else:
            time.sleep(slow_s)
    print(f"ROLE {rank} {name} {role}", flush=True)


# 1. A save only rank 0 makes (the Keras guide's `if rank == 0: model.save(...)`), slow
#    enough that rank 1 reaches the next, shared save while it runs. Rank 0's save count is
#    now ahead of rank 1's: rank 1 must still wait for rank 0 to write the shared path, not
#    take it for a path of its own and write the same directory at the same time.
if rank == 0:
    save("only-rank-0", slow_s=1.5)
save("shared", slow_s=0.3)
tfring.barrier()
# 2. Per-rank paths at the same point, without local_save(): each rank writes its own.
save(f"own-{rank}")
tfring.barrier()
tfring.shutdown()
"""


def test_a_save_only_rank_0_made_earlier_does_not_make_a_shared_path_look_like_a_rank_s_own(tmp_path):
    result = run_job(2, SAVES, timeout=90, script_args=(str(tmp_path),),
                     env={"TFRING_TIMEOUT_S": "20"})
    roles = {}
    for line in result.stdout.splitlines():
        if "ROLE" in line:
            _, rank, name, role = line[line.index("ROLE"):].split()
            roles[(rank, name)] = role
    assert roles[("0", "only-rank-0")] == "writer", result.stdout
    assert roles[("0", "shared")] == "writer" and roles[("1", "shared")] == "waiter", result.stdout
    assert roles[("0", "own-0")] == "writer" and roles[("1", "own-1")] == "own", result.stdout
    with open(os.path.join(tmp_path, "shared", "weights")) as f:
        assert f.read() == "rank 0"
    for r in (0, 1):
        with open(os.path.join(tmp_path, f"own-{r}", "weights")) as f:
            assert f.read() == f"rank {r}"
    assert not [name for name in os.listdir(tmp_path) if ".tmp-" in name], os.listdir(tmp_path)


CONCURRENT = r"""
import os, sys, threading
from tfring.saving import atomic_write_directory

path = sys.argv[1]
errors = []


def writer(i):
    def write(tmp):
        os.makedirs(tmp)
        with open(os.path.join(tmp, "weights"), "w") as f:
            f.write("same weights")
    try:
        for _ in range(30):
            atomic_write_directory(path, write)
    except Exception as e:
        errors.append(repr(e))


threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("ERRORS", errors)
"""


def test_writers_of_the_same_directory_at_once_all_succeed_and_leave_one_complete_copy(tmp_path):
    import subprocess
    import sys

    from tests.helpers import REPO_ROOT

    target = tmp_path / "ckpt"
    out = subprocess.run([sys.executable, "-c", CONCURRENT, str(target)], capture_output=True, text=True,
                         timeout=60, env=dict(os.environ, PYTHONPATH=REPO_ROOT), check=False)
    assert "ERRORS []" in out.stdout, out.stdout + out.stderr
    assert (target / "weights").read_text() == "same weights"
    assert sorted(os.listdir(tmp_path)) == ["ckpt"], os.listdir(tmp_path)


def test_a_waiting_rank_raises_the_writers_class_with_its_message():
    """Issue 40: what a waiting rank raises for the writer's failure (writer_error.py)."""
    import pytest

    from tfring._saving import writer_error
    from tfring.saving import SaveAbortedError

    for writer_exc in (ValueError("Received: filepath=/tmp/tf_save."), FileNotFoundError(2, "No such file", "/x"),
                       RuntimeError("runtime")):
        waiter_exc = writer_error.rebuild(writer_error.describe(writer_exc), SaveAbortedError)
        assert isinstance(waiter_exc, SaveAbortedError) and isinstance(waiter_exc, type(writer_exc))
        assert type(waiter_exc).__name__ == type(writer_exc).__name__
        assert str(waiter_exc) == str(writer_exc) and waiter_exc.args == (str(writer_exc),)
        with pytest.raises(type(writer_exc)):
            raise waiter_exc
    unknown = writer_error.rebuild({"type": "no.such.module:Error", "message": "boom"}, SaveAbortedError)
    assert type(unknown) is SaveAbortedError and str(unknown) == "Error: boom"
    clash = writer_error.rebuild(writer_error.describe(UnicodeDecodeError("utf-8", b"x", 0, 1, "bad")),
                                 SaveAbortedError)
    assert isinstance(clash, SaveAbortedError) and "UnicodeDecodeError" in str(clash)
